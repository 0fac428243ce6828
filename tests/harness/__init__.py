"""Real-Apache-Kafka oracle harness for kraftkit tests.

Modules:
  jars      -- fetch Kafka jars (+ runtime deps) from Maven Central with mvn
  node      -- KafkaNode: a single combined KRaft broker+controller process
  quorum    -- KafkaQuorum: three KRaft voters (broker+controller and two controllers)
  tools     -- run Kafka's own Java tools (dump-log, topics, producer, consumer)
  dumplog   -- parse kafka-dump-log text output into dicts
  scenario  -- build (and cache) a realistic data set written by real Kafka
"""
