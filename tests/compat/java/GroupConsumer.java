// The Java consumer 4.1.1 as the tests drive it (run from source: `infra/reference/kafka tool
// tests/compat/java/GroupConsumer.java ARGS`, Java 17's source launcher; no build step).
// Args: PROPERTIES_FILE GROUP PROTOCOL SUBSCRIPTION MAX_RECORDS IDLE_MS [stdin]
//   PROTOCOL      consumer | classic (group.protocol)
//   SUBSCRIPTION  regex:R   -> subscribe(new SubscriptionPattern(R)): the broker evaluates R (KIP-848)
//                 topics:A,B -> subscribe(List.of(A, B))
// Prints `ASSIGNED t-p,...` on each assignment change and `RECORD topic partition offset value`
// for each record, after its offset commit (commitSync) returned (a batch whose commit fails is
// not printed: its records are read again, by this consumer if it kept the partition); stops after
// MAX_RECORDS records, IDLE_MS without a record once some partitions are assigned, or (with
// `stdin`) when a line or EOF comes on stdin; closes (leaving the group).
import java.io.BufferedReader;
import java.io.FileReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class GroupConsumer {
  public static void main(String[] args) throws Exception {
    Properties props = new Properties();
    try (FileReader reader = new FileReader(args[0])) {
      props.load(reader);
    }
    props.put("group.id", args[1]);
    props.put("group.protocol", args[2]);
    props.put("key.deserializer", StringDeserializer.class.getName());
    props.put("value.deserializer", StringDeserializer.class.getName());
    props.put("auto.offset.reset", "earliest");
    props.put("enable.auto.commit", "false");
    String subscription = args[3];
    int max = Integer.parseInt(args[4]);
    long idleMs = Long.parseLong(args[5]);
    final boolean[] stop = {false};
    if (args.length > 6 && args[6].equals("stdin")) {
      Thread watcher = new Thread(() -> {
        try {
          new BufferedReader(new InputStreamReader(System.in)).readLine();
        } catch (Exception e) {
          // EOF or a closed pipe: stop as well
        }
        synchronized (stop) {
          stop[0] = true;
        }
      });
      watcher.setDaemon(true);
      watcher.start();
    }
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
      if (subscription.startsWith("regex:")) {
        consumer.subscribe(new SubscriptionPattern(subscription.substring(6)));
      } else {
        consumer.subscribe(Arrays.asList(subscription.substring(7).split(",")));
      }
      int read = 0;
      String announced = null;
      long lastRecord = System.currentTimeMillis();
      while (read < max) {
        synchronized (stop) {
          if (stop[0]) {
            break;
          }
        }
        ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
        Set<String> owned = new TreeSet<>();
        for (TopicPartition tp : consumer.assignment()) {
          owned.add(tp.topic() + "-" + tp.partition());
        }
        String now = String.join(",", owned);
        if (!now.equals(announced)) {
          announced = now;
          System.out.println("ASSIGNED " + now);
          System.out.flush();
        }
        if (records.isEmpty()) {
          if (!owned.isEmpty() && System.currentTimeMillis() - lastRecord > idleMs) {
            break;
          }
          continue;
        }
        try {
          consumer.commitSync();
        } catch (Exception e) {
          System.out.println("COMMIT_FAILED " + e.getClass().getSimpleName());
          System.out.flush();
          for (TopicPartition tp : records.partitions()) {  // read them again if still ours
            if (consumer.assignment().contains(tp)) {
              consumer.seek(tp, records.records(tp).get(0).offset());
            }
          }
          continue;
        }
        for (ConsumerRecord<String, String> record : records) {
          System.out.println("RECORD " + record.topic() + " " + record.partition() + " "
              + record.offset() + " " + record.value());
          read++;
        }
        System.out.flush();
        lastRecord = System.currentTimeMillis();
      }
    }
  }
}
