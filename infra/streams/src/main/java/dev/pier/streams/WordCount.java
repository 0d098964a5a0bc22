package dev.pier.streams;

import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.regex.Pattern;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * Word count with exactly_once_v2: input lines (String values) are split into lower-case words,
 * re-keyed by word (the repartition topic {@code <application.id>-words-repartition}), counted in
 * the key-value store {@code word-counts} (changelog {@code <application.id>-word-counts-changelog})
 * and every new count is written to the output topic (String word, Long count).
 *
 * <p>Settings, each an option or else an environment variable:
 * <pre>
 *   --bootstrap HOSTS           PIER_STREAMS_BOOTSTRAP        (required)
 *   --application-id ID         PIER_STREAMS_APPLICATION_ID   (default pier-wordcount)
 *   --input TOPIC               PIER_STREAMS_INPUT            (default wordcount-input)
 *   --output TOPIC              PIER_STREAMS_OUTPUT           (default wordcount-output)
 *   --state-dir DIR             PIER_STREAMS_STATE_DIR        (default: Kafka Streams' own)
 *   --replication-factor N      PIER_STREAMS_REPLICATION_FACTOR (internal topics; default -1,
 *                                                             the broker's default)
 *   --config KEY=VALUE          any StreamsConfig or client setting (repeatable; last wins)
 * </pre>
 *
 * <p>Standard output carries one line per state change, {@code state=RUNNING} and so on, for the
 * tests to wait on; logs go to standard error. SIGTERM closes the application (a clean shutdown);
 * an uncaught error in a stream thread shuts the client down and the process exits with status 1.
 */
public final class WordCount {
  static final String STORE = "word-counts";
  static final String REPARTITION = "words";
  private static final Pattern NON_WORD = Pattern.compile("\\W+", Pattern.UNICODE_CHARACTER_CLASS);

  private WordCount() {}

  /** The topology: input lines to (word, count) updates. */
  static Topology topology(String input, String output) {
    StreamsBuilder builder = new StreamsBuilder();
    KStream<String, String> lines =
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()));
    lines
        .flatMapValues(line -> Arrays.asList(NON_WORD.split(line.toLowerCase(Locale.ROOT))))
        .filter((key, word) -> !word.isEmpty())
        .groupBy((key, word) -> word, Grouped.with(REPARTITION, Serdes.String(), Serdes.String()))
        .count(
            Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as(STORE)
                .withKeySerde(Serdes.String())
                .withValueSerde(Serdes.Long()))
        .toStream()
        .to(output, Produced.with(Serdes.String(), Serdes.Long()));
    return builder.build();
  }

  /** Options first, then the environment, then the defaults. */
  static Properties settings(String[] args, Map<String, String> env) {
    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, env.getOrDefault("PIER_STREAMS_APPLICATION_ID", "pier-wordcount"));
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
    props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, env.getOrDefault("PIER_STREAMS_REPLICATION_FACTOR", "-1"));
    putIfSet(props, StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, env.get("PIER_STREAMS_BOOTSTRAP"));
    putIfSet(props, StreamsConfig.STATE_DIR_CONFIG, env.get("PIER_STREAMS_STATE_DIR"));
    props.put("pier.input", env.getOrDefault("PIER_STREAMS_INPUT", "wordcount-input"));
    props.put("pier.output", env.getOrDefault("PIER_STREAMS_OUTPUT", "wordcount-output"));
    for (int i = 0; i < args.length; i += 2) {
      if (i + 1 >= args.length) {
        throw new IllegalArgumentException("option " + args[i] + " needs a value");
      }
      String value = args[i + 1];
      switch (args[i]) {
        case "--bootstrap" -> props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, value);
        case "--application-id" -> props.put(StreamsConfig.APPLICATION_ID_CONFIG, value);
        case "--input" -> props.put("pier.input", value);
        case "--output" -> props.put("pier.output", value);
        case "--state-dir" -> props.put(StreamsConfig.STATE_DIR_CONFIG, value);
        case "--replication-factor" -> props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, value);
        case "--config" -> {
          int eq = value.indexOf('=');
          if (eq <= 0) {
            throw new IllegalArgumentException("--config takes KEY=VALUE, got " + value);
          }
          props.put(value.substring(0, eq), value.substring(eq + 1));
        }
        default -> throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    if (!props.containsKey(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG)) {
      throw new IllegalArgumentException("--bootstrap (or PIER_STREAMS_BOOTSTRAP) is required");
    }
    return props;
  }

  private static void putIfSet(Properties props, String key, String value) {
    if (value != null && !value.isEmpty()) {
      props.put(key, value);
    }
  }

  private static void say(String line) {
    System.out.println(line);
    System.out.flush();
  }

  public static void main(String[] args) throws InterruptedException {
    Properties props;
    try {
      props = settings(args, System.getenv());
    } catch (IllegalArgumentException e) {
      System.err.println("wordcount: " + e.getMessage());
      System.exit(2);
      return;
    }
    String input = (String) props.remove("pier.input");
    String output = (String) props.remove("pier.output");
    KafkaStreams streams = new KafkaStreams(topology(input, output), props);
    CountDownLatch stopped = new CountDownLatch(1);
    boolean[] failed = {false};
    streams.setStateListener(
        (now, before) -> {
          say("state=" + now);
          if (now == KafkaStreams.State.ERROR) {
            failed[0] = true;
          }
          if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) {
            stopped.countDown();
          }
        });
    streams.setUncaughtExceptionHandler(
        error -> {
          System.err.println("wordcount: stream thread failed: " + error);
          failed[0] = true;
          return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
    Runtime.getRuntime()
        .addShutdownHook(new Thread(() -> streams.close(Duration.ofSeconds(30)), "wordcount-close"));
    streams.start();
    stopped.await();
    streams.close(Duration.ofSeconds(30));
    System.exit(failed[0] ? 1 : 0);
  }
}
