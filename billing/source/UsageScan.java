/*
 * The billing rollup's fast path for canonical usage records, as a Spark SQL Java UDF
 * (billing/source/scan.py registers it as `pier_usage_scan`; infra/spark_jars.py compiles it).
 *
 * call(key, value) reads the value's bytes once, without a parser or a per-record buffer, and
 * returns its fields as a Row of scan.py's SCAN_SCHEMA when the value is exactly what
 * tenancy.usage.encode writes and the contract holds for it, else null (the caller then runs the
 * exact rules of billing/source/usage.py on the record). It accepts the same records as
 * usage.py's FAST_RECORD regular expression with its window and key checks, or fewer, never more:
 * UTF-8 that Unicode calls well-formed; the fields in encode's order; strings without escapes
 * or control characters (no '"', no backslash, no C0, no DEL in the principal and client id),
 * lengths counted in code points (as the contract and the regular expression count them); counters of at most 18 digits without leading zeros; a traffic
 * id with two '/', a storage id ending with its own tenant, topic, partition and at_ms; a
 * traffic window in order within one UTC hour; a key, if any, equal to the id's bytes.
 * Stateless: one instance may serve many threads.
 */
package dev.pier.billing;

import java.nio.charset.StandardCharsets;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF2;

public final class UsageScan implements UDF2<byte[], byte[], Row> {
  private static final long serialVersionUID = 1L;
  // tenancy/usage.py's constants (tests/unit/billing/test_usage_scan.py holds them equal)
  static final int VERSION = 1;
  static final int MAX_RECORD_BYTES = 4096;
  static final int MAX_NAME = 255;
  static final long HOUR_MS = 3600000L;
  static final int MAX_DIGITS = 18;
  static final int MAX_PARTITION_DIGITS = 9;

  private static final byte[] HEAD = ascii("{\"v\":" + VERSION + ",\"id\":\"");
  private static final byte[] KIND = ascii(",\"kind\":\"");
  private static final byte[] TRAFFIC = ascii("traffic\",\"tenant\":\"");
  private static final byte[] STORAGE = ascii("storage\",\"tenant\":\"");
  private static final byte[] TOPIC = ascii(",\"topic\":");
  private static final byte[] NULL = ascii("null");
  private static final byte[] PRINCIPAL = ascii(",\"principal\":\"");
  private static final byte[] CLIENT_ID = ascii(",\"client_id\":\"");
  private static final byte[][] TRAFFIC_COUNTS = {
    ascii(",\"start_ms\":"), ascii(",\"end_ms\":"), ascii(",\"bytes_in\":"),
    ascii(",\"bytes_out\":"), ascii(",\"requests\":"), ascii(",\"throttle_ms\":"),
    ascii(",\"connection_ms\":"),
  };
  private static final byte[] PARTITION = ascii(",\"partition\":");
  private static final byte[] BYTES = ascii(",\"bytes\":");
  private static final byte[] AT_MS = ascii(",\"at_ms\":");

  private static byte[] ascii(String text) {
    return text.getBytes(StandardCharsets.US_ASCII);
  }

  /** Where a scan stands in one value; a fresh one per call, so calls share nothing. */
  private static final class Cursor {
    final byte[] b;
    int at;

    Cursor(byte[] b) {
      this.b = b;
    }

    boolean literal(byte[] expected) {
      if (b.length - at < expected.length) {
        return false;
      }
      for (int k = 0; k < expected.length; k++) {
        if (b[at + k] != expected[k]) {
          return false;
        }
      }
      at += expected.length;
      return true;
    }

    boolean next(char expected) {
      if (at < b.length && b[at] == expected) {
        at++;
        return true;
      }
      return false;
    }

    /** A string's body up to its closing '"' (consumed): its end, or -1 if a byte is not
     * allowed (a backslash, a C0 control, DEL when `noDel`) or no '"' follows. */
    int body(boolean noDel) {
      for (int k = at; k < b.length; k++) {
        int c = b[k] & 0xff;
        if (c == '"') {
          int end = k;
          at = k + 1;
          return end;
        }
        if (c == '\\' || c < 0x20 || (noDel && c == 0x7f)) {
          return -1;
        }
      }
      return -1;
    }

    /** A counter: "0" or 1 to `digits` digits without a leading zero; -1 if there is none. */
    long count(int digits) {
      int first = at;
      long value = 0;
      while (at < b.length && b[at] >= '0' && b[at] <= '9' && at - first < digits + 1) {
        value = value * 10 + (b[at] - '0');
        at++;
      }
      int length = at - first;
      if (length == 0 || length > digits || (length > 1 && b[first] == '0')) {
        return -1;
      }
      return value;
    }

    String text(int from, int to) {
      return new String(b, from, to - from, StandardCharsets.UTF_8);
    }
  }

  @Override
  public Row call(byte[] key, byte[] value) {
    if (value == null || value.length > MAX_RECORD_BYTES || !wellFormed(value)) {
      return null;
    }
    Cursor c = new Cursor(value);
    if (!c.literal(HEAD)) {
      return null;
    }
    int idFrom = c.at;
    int idTo = c.body(false);
    int idChars = idTo < 0 ? -1 : codePoints(value, idFrom, idTo);
    if (idChars < 1 || idChars > 2 * MAX_NAME || !c.literal(KIND)) {
      return null;
    }
    if (key != null && !sameBytes(key, value, idFrom, idTo)) {
      return null;
    }
    if (c.literal(TRAFFIC)) {
      return traffic(c, idFrom, idTo);
    }
    if (c.literal(STORAGE)) {
      return storage(c, idFrom, idTo);
    }
    return null;
  }

  private static Row traffic(Cursor c, int idFrom, int idTo) {
    if (slashes(c.b, idFrom, idTo) != 2) {
      return null;
    }
    int tenantFrom = c.at;
    int tenantTo = c.body(true);
    if (!tenant(c.b, tenantFrom, tenantTo) || !c.literal(TOPIC)) {
      return null;
    }
    String topic = null;
    if (!c.literal(NULL)) {
      int topicFrom = c.at + 1;
      if (!c.next('"')) {
        return null;
      }
      int topicTo = c.body(true);
      if (!topicName(c.b, topicFrom, topicTo)) {
        return null;
      }
      topic = c.text(topicFrom, topicTo);
    }
    if (!c.literal(PRINCIPAL)) {
      return null;
    }
    int principalFrom = c.at;
    int principalTo = c.body(true);
    if (!printable(c.b, principalFrom, principalTo, 1) || !c.literal(CLIENT_ID)) {
      return null;
    }
    int clientFrom = c.at;
    int clientTo = c.body(true);
    if (!printable(c.b, clientFrom, clientTo, 0)) {
      return null;
    }
    long[] counts = new long[TRAFFIC_COUNTS.length];
    for (int k = 0; k < counts.length; k++) {
      if (!c.literal(TRAFFIC_COUNTS[k]) || (counts[k] = c.count(MAX_DIGITS)) < 0) {
        return null;
      }
    }
    if (!c.next('}') || c.at != c.b.length) {
      return null;
    }
    long start = counts[0];
    long end = counts[1];
    if (end < start || end > start - start % HOUR_MS + HOUR_MS) {
      return null;
    }
    return RowFactory.create(
        c.text(idFrom, idTo), "traffic", c.text(tenantFrom, tenantTo),
        c.text(principalFrom, principalTo), c.text(clientFrom, clientTo), topic,
        start, end, counts[2], counts[3], counts[4], counts[5], counts[6],
        null, null, null);
  }

  private static Row storage(Cursor c, int idFrom, int idTo) {
    int tenantFrom = c.at;
    int tenantTo = c.body(true);
    if (!tenant(c.b, tenantFrom, tenantTo) || !c.literal(TOPIC) || !c.next('"')) {
      return null;
    }
    int topicFrom = c.at;
    int topicTo = c.body(true);
    if (!topicName(c.b, topicFrom, topicTo) || !c.literal(PARTITION)) {
      return null;
    }
    int partitionFrom = c.at;
    long partition = c.count(MAX_PARTITION_DIGITS);
    int partitionTo = c.at;
    if (partition < 0 || !c.literal(BYTES)) {
      return null;
    }
    long bytes = c.count(MAX_DIGITS);
    if (bytes < 0 || !c.literal(AT_MS)) {
      return null;
    }
    int atFrom = c.at;
    long at = c.count(MAX_DIGITS);
    int atTo = c.at;
    if (at < 0 || !c.next('}') || c.at != c.b.length) {
      return null;
    }
    // the id is <sampler>/<tenant>/<topic>/<partition>/<at_ms>: four '/', its own fields
    int[][] parts = {{tenantFrom, tenantTo}, {topicFrom, topicTo}, {partitionFrom, partitionTo}, {atFrom, atTo}};
    int suffix = 0;
    for (int[] part : parts) {
      suffix += 1 + part[1] - part[0];
    }
    if (slashes(c.b, idFrom, idTo) != 4 || idTo - idFrom < suffix) {
      return null;
    }
    int k = idTo - suffix;
    for (int[] part : parts) {
      if (c.b[k++] != '/') {
        return null;
      }
      for (int j = part[0]; j < part[1]; j++) {
        if (c.b[k++] != c.b[j]) {
          return null;
        }
      }
    }
    return RowFactory.create(
        c.text(idFrom, idTo), "storage", c.text(tenantFrom, tenantTo), null, null,
        c.text(topicFrom, topicTo), null, null, null, null, null, null, null,
        (int) partition, bytes, at);
  }

  /** [a-z][a-z0-9-]{2,15} (tenancy.ids.TENANT_ID). */
  private static boolean tenant(byte[] b, int from, int to) {
    if (to < 0 || to - from < 3 || to - from > 16 || b[from] < 'a' || b[from] > 'z') {
      return false;
    }
    for (int k = from + 1; k < to; k++) {
      byte c = b[k];
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
        return false;
      }
    }
    return true;
  }

  /** [A-Za-z0-9._-]{1,249}. */
  private static boolean topicName(byte[] b, int from, int to) {
    if (to < 0 || to - from < 1 || to - from > 249) {
      return false;
    }
    for (int k = from; k < to; k++) {
      byte c = b[k];
      boolean ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
          || c == '.' || c == '_' || c == '-';
      if (!ok) {
        return false;
      }
    }
    return true;
  }

  /** A body `Cursor.body(true)` accepted (-1: it did not) of `least` to MAX_NAME characters. */
  private static boolean printable(byte[] b, int from, int to, int least) {
    if (to < 0) {
      return false;
    }
    int chars = codePoints(b, from, to);
    return chars >= least && chars <= MAX_NAME;
  }

  /** The code points of well-formed UTF-8: what the contract's lengths (Python's len, Spark's
   * char_length) and FAST_RECORD's bounds (java.util.regex matches a class per code point) count. */
  private static int codePoints(byte[] b, int from, int to) {
    int n = 0;
    for (int k = from; k < to; k++) {
      if ((b[k] & 0xc0) != 0x80) {
        n++;
      }
    }
    return n;
  }

  private static int slashes(byte[] b, int from, int to) {
    int n = 0;
    for (int k = from; k < to; k++) {
      if (b[k] == '/') {
        n++;
      }
    }
    return n;
  }

  private static boolean sameBytes(byte[] key, byte[] b, int from, int to) {
    if (key.length != to - from) {
      return false;
    }
    for (int k = 0; k < key.length; k++) {
      if (key[k] != b[from + k]) {
        return false;
      }
    }
    return true;
  }

  /** Well-formed UTF-8 (Unicode's Table 3-7: no overlong form, no surrogate, at most U+10FFFF). */
  static boolean wellFormed(byte[] b) {
    int k = 0;
    int n = b.length;
    while (k < n) {
      int c = b[k] & 0xff;
      if (c < 0x80) {
        k++;
        continue;
      }
      int need;
      int low = 0x80;
      int high = 0xbf;
      if (c >= 0xc2 && c <= 0xdf) {
        need = 1;
      } else if (c >= 0xe0 && c <= 0xef) {
        need = 2;
        if (c == 0xe0) {
          low = 0xa0;
        } else if (c == 0xed) {
          high = 0x9f;
        }
      } else if (c >= 0xf0 && c <= 0xf4) {
        need = 3;
        if (c == 0xf0) {
          low = 0x90;
        } else if (c == 0xf4) {
          high = 0x8f;
        }
      } else {
        return false;
      }
      if (k + need >= n) {
        return false;
      }
      int second = b[k + 1] & 0xff;
      if (second < low || second > high) {
        return false;
      }
      for (int j = 2; j <= need; j++) {
        int next = b[k + j] & 0xff;
        if (next < 0x80 || next > 0xbf) {
          return false;
        }
      }
      k += need + 1;
    }
    return true;
  }
}
