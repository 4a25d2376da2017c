"""Google Application Default Credentials for Cloud Monitoring's PromQL endpoint.

The endpoint (``https://monitoring.googleapis.com/v1/projects/PROJECT/location/global/prometheus``,
the one Google Managed Prometheus uses) wants an OAuth access token with the
``monitoring.read`` scope; the caller needs ``monitoring.timeSeries.list`` (the role
``roles/monitoring.viewer``). :class:`GoogleCredentials` finds Application Default Credentials
through google-auth as every Google client does: ``GOOGLE_APPLICATION_CREDENTIALS``, then
``gcloud auth application-default login``'s file, then the metadata server (Workload Identity in
a GKE pod, ``GCE_METADATA_HOST`` when set). Before every query it gives the header to send,
refreshing the token first when it is within google-auth's refresh margin of expiring (a long
export outlives an hour-long token). Every call it makes to the token endpoint or the metadata
server goes through :class:`scaler.history.http.GoogleAuthRequest` (a deadline and a byte cap).

No token is ever printed or stored: errors say what failed (no credentials, the refresh
refused and why, in the server's own one-word error), with any token or secret the
credentials hold replaced by ``***``.
"""

from __future__ import annotations

from typing import Any

import httpx

from scaler.history.errors import HistoryError, one_line
from scaler.history.http import GoogleAuthRequest

__all__ = ["GOOGLE_HOSTS", "HISTORY_IAM_PERMISSIONS", "MONITORING_READ_SCOPE", "GoogleCredentials"]

MONITORING_READ_SCOPE = "https://www.googleapis.com/auth/monitoring.read"
"""The OAuth scope of reading Cloud Monitoring (``monitoring.timeSeries.list``)."""
HISTORY_IAM_PERMISSIONS = ("monitoring.timeSeries.list",)
"""The IAM permissions reading history from Cloud Monitoring needs (``deploy/gke/iam-role-history.yaml``;
the predefined ``roles/monitoring.viewer`` includes it)."""
GOOGLE_HOSTS = ("monitoring.googleapis.com",)
"""Hosts for which ``--prometheus-auth auto`` uses Application Default Credentials."""


class GoogleCredentials:
    """Application Default Credentials, refreshed before they expire (see the module doc).

    Args:
        client: the httpx client the token calls go through.
        deadline: the longest one token call may take (seconds).

    Raises:
        HistoryError: no Application Default Credentials are found.
    """

    def __init__(self, client: httpx.Client, deadline: float) -> None:
        import google.auth
        from google.auth import exceptions

        self.request = GoogleAuthRequest(client, deadline)
        try:
            self.credentials, self.project = google.auth.default(
                scopes=[MONITORING_READ_SCOPE], request=self.request
            )
        except exceptions.DefaultCredentialsError as e:
            raise HistoryError(
                "no Google Application Default Credentials for Cloud Monitoring "
                f"({self._scrub(one_line(e, 200))}): run `gcloud auth application-default login`, or run in a "
                "GKE pod whose Kubernetes service account is bound to a Google service account with "
                "roles/monitoring.viewer (Workload Identity)"
            ) from None

    def headers(self, method: str, url: str) -> dict[str, str]:
        """The headers to send with a call to ``url`` (``authorization``; a quota project when
        the credentials name one), the token refreshed first when it nears expiry.

        Raises:
            HistoryError: the token cannot be had (one line, no secret in it).
        """
        from google.auth import exceptions

        out: dict[str, str] = {}
        try:
            self.credentials.before_request(self.request, method, url, out)  # type: ignore[no-untyped-call]
        except exceptions.GoogleAuthError as e:
            reason = e.args[0] if e.args else type(e).__name__
            raise HistoryError(
                f"Google credentials: cannot get an access token: {self._scrub(one_line(reason, 200))}"
            ) from None
        return out

    def _scrub(self, text: str) -> str:
        """``text`` with every secret the credentials hold replaced by ``***``."""
        creds: Any = getattr(self, "credentials", None)
        for name in ("token", "refresh_token", "client_secret", "_refresh_token", "_client_secret"):
            value = getattr(creds, name, None)
            if isinstance(value, str) and len(value) >= 4:
                text = text.replace(value, "***")
        return text
