import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * A gateway as the tests need one: Apache Kafka's own Java producer (kafka-clients, from the
 * broker's jars), run as a single-file program (`java -cp <lib>/* Gateway.java ...`).
 *
 * Arguments: bootstrap topic compression(none|gzip|snappy|lz4|zstd) mode(plain|commit|abort).
 * Standard input: one record a line, `key<TAB>value<TAB>headers`, each base64, `-` for a null key or
 * value, headers as `name=base64value` joined by `,` (or empty). In `commit` and `abort` mode every
 * record is sent in one transaction, then committed or aborted. Prints `sent N` and exits 0.
 */
public class Gateway {
  public static void main(String[] args) throws Exception {
    String bootstrap = args[0], topic = args[1], compression = args[2], mode = args[3];
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
    // Batches of many records, so a compressed batch holds several.
    p.put(ProducerConfig.LINGER_MS_CONFIG, "50");
    p.put(ProducerConfig.BATCH_SIZE_CONFIG, "262144");
    p.put(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, "1048576");
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    boolean transactional = !mode.equals("plain");
    if (transactional) p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "gateway-" + topic + "-" + mode + "-" + System.nanoTime());
    Base64.Decoder b64 = Base64.getDecoder();
    int sent = 0;
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
      if (transactional) {
        producer.initTransactions();
        producer.beginTransaction();
      }
      BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
      for (String line; (line = in.readLine()) != null; ) {
        if (line.isEmpty()) continue;
        String[] f = line.split("\t", -1);
        byte[] key = f[0].equals("-") ? null : b64.decode(f[0]);
        byte[] value = f[1].equals("-") ? null : b64.decode(f[1]);
        ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(topic, key, value);
        if (f.length > 2 && !f[2].isEmpty()) {
          for (String h : f[2].split(",")) {
            int eq = h.indexOf('=');
            record.headers().add(h.substring(0, eq), b64.decode(h.substring(eq + 1)));
          }
        }
        producer.send(record);
        sent++;
      }
      producer.flush();
      if (mode.equals("commit")) producer.commitTransaction();
      if (mode.equals("abort")) producer.abortTransaction();
    }
    System.out.println("sent " + sent);
  }
}
