"""How assignors meet the outside: the assignment-request JSON, Kafka's ConsumerProtocol and
sticky user-data bytes, and the adapter that runs any ktk assignor inside kafka-python.

- :mod:`assignors.protocol.request`: the request JSON (spec/assignors.md) in and out.
- :mod:`assignors.protocol.wire`: ConsumerProtocol Subscription/Assignment and user-data codecs.
- :mod:`assignors.protocol.kafka_python`: the kafka-python adapter.
"""
