"""The Kafka wire protocol, as far as KRaft needs it: request and response headers, ApiVersions
(with version negotiation) and the quorum RPCs (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch,
FetchSnapshot, DescribeQuorum, Add/Remove/UpdateRaftVoter).

Messages are dicts keyed by the schema's field names (``{"ClusterId": ..., "Topics": [...]}``),
encoded and decoded by the Rust codec from tables generated from Kafka's own JSON schemas
(``scripts/gen_schemas.py``). :class:`KafkaConnection` is a small blocking client with Kafka's
framing (a 4-byte size, then header and body), correlation ids and timeouts.
"""

from kraftkit.protocol.client import FeatureAnswer, FeatureCache, KafkaConnection, ProtocolError, negotiate
from kraftkit.protocol.messages import (
    API_KEYS,
    ApiKey,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    supported_versions,
)

__all__ = [
    "API_KEYS",
    "ApiKey",
    "FeatureAnswer",
    "FeatureCache",
    "KafkaConnection",
    "ProtocolError",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "negotiate",
    "supported_versions",
]
