"""Producer partitioning: Kafka's and librdkafka's hashes and partitioners, a record-accumulator
model that drives them as the producer does, and key-trace scoring."""
