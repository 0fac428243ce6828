"""``ProducerIdControlManager``: blocks of producer ids for brokers, as Kafka's controller hands them out.

A broker asks for a block (AllocateProducerIds) when its idempotent and transactional producers have
used up the one it had. The block is the next ``PRODUCER_ID_BLOCK_SIZE`` (1000) ids from the image's
next producer id (0 in a new cluster), given once its ``ProducerIdsRecord`` (the new next id, the
broker and its epoch) is committed; the broker must be registered at the epoch it gives
(STALE_BROKER_EPOCH otherwise). Ids never go back: a block is never handed out twice, also across
a failover, since the next id is in the log before the answer leaves.
"""

from __future__ import annotations

from dataclasses import dataclass

from kraftkit._core import encode_metadata_record
from kraftkit._kafka import PRODUCER_IDS
from kraftkit.controller.cluster import ClusterControlManager, ControllerError
from kraftkit.metadata.image import MetadataImage
from kraftkit.protocol.messages import Errors

__all__ = ["PRODUCER_ID_BLOCK_SIZE", "ProducerIdControlManager", "ProducerIdsBlock"]

#: Kafka's ``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``
PRODUCER_ID_BLOCK_SIZE = 1000
LONG_MAX = 2**63 - 1


@dataclass(frozen=True)
class ProducerIdsBlock:
    broker_id: int
    first: int
    size: int


class ProducerIdControlManager:
    def __init__(self, cluster: ClusterControlManager) -> None:
        self.cluster = cluster

    def generate_next_block(
        self, image: MetadataImage, broker_id: int, broker_epoch: int
    ) -> tuple[list[bytes], ProducerIdsBlock]:
        """The ProducerIdsRecord of the next block for ``broker_id`` at ``broker_epoch``, and the block."""
        self.cluster.check_broker_epoch(image, broker_id, broker_epoch)
        first = max(image.next_producer_id, 0)  # (-1: none handed out yet; the first block starts at 0)
        if first > LONG_MAX - PRODUCER_ID_BLOCK_SIZE:
            raise ControllerError(
                Errors.UNKNOWN_SERVER_ERROR,
                "Exhausted all producerIds as the next block's end producerId has exceeded the int64 type limit",
            )
        block = ProducerIdsBlock(broker_id, first, PRODUCER_ID_BLOCK_SIZE)
        record = {"BrokerId": broker_id, "BrokerEpoch": broker_epoch, "NextProducerId": first + PRODUCER_ID_BLOCK_SIZE}
        return [encode_metadata_record(PRODUCER_IDS, 0, record)], block
