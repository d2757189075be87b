"""swflows: software-configuration deployments as resumable TaskFlow graphs."""

from swflows.exceptions import SwflowsError

__all__ = ["SwflowsError"]
