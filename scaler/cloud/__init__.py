"""Cloud providers: node groups (GKE node pools) with their size limits, and node deletion.

* :class:`~scaler.cloud.base.CloudProvider`: the protocol the controller codes against;
* :class:`~scaler.cloud.gke.GKEProvider`: GKE node pools and their MIGs (GKE + Compute APIs);
* :class:`~scaler.cloud.kubernetes.KubernetesProvider`: node-pool labels and Node objects only;
* :mod:`scaler.cloud.metadata`: project, cluster and location from the metadata server.

Importing this package does not import the Google or Kubernetes client libraries; import
:mod:`scaler.cloud.gke` or :mod:`scaler.cloud.kubernetes` for the providers.
"""

from scaler.cloud.base import (
    DELETE_CALLS,
    IAM_PERMISSIONS,
    READ_CALLS,
    CloudError,
    CloudProvider,
    MigInfo,
    MinSizeReached,
    NodeGroupInfo,
    ZoneGroupInfo,
    check_min_size,
    check_zone_min_size,
)

__all__ = [
    "DELETE_CALLS",
    "IAM_PERMISSIONS",
    "READ_CALLS",
    "CloudError",
    "CloudProvider",
    "MigInfo",
    "MinSizeReached",
    "NodeGroupInfo",
    "ZoneGroupInfo",
    "check_min_size",
    "check_zone_min_size",
]
