"""ZooKeeper to KRaft, offline (beyond Kafka): a stopped ZooKeeper-mode cluster's metadata read
from ZooKeeper (:mod:`kraftkit.migration.zk_reader`) and written as KRaft controller directories
and KRaft broker ``meta.properties`` (:mod:`kraftkit.migration.convert`)."""
