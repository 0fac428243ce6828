"""The KRaft controller over kraftkit's raft replica (see :mod:`kraftkit.controller.quorum_controller`).

This floor imports raft/, features/, metadata/, protocol/ and below; only the CLI imports it.
"""

from kraftkit.controller.bootstrap import BootstrapError, BootstrapMetadata, read_bootstrap_metadata
from kraftkit.controller.features import FeatureControlManager, local_supported_features
from kraftkit.controller.quorum_controller import QuorumController
from kraftkit.controller.server import ControllerNode

__all__ = [
    "BootstrapError",
    "BootstrapMetadata",
    "ControllerNode",
    "FeatureControlManager",
    "QuorumController",
    "local_supported_features",
    "read_bootstrap_metadata",
]
