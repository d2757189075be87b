"""The baseline: how Heat polls TEMP_URL_SIGNAL deployments.

Heat's engine checks each waiting deployment once a second on its own: a
HEAD of the deployment's signal object, and a GET of it only when its
``Last-Modified`` is later than the time the deployment last changed.
:class:`HeatStylePoller` does exactly those requests for a set of objects,
one deployment after the other, over one keep-alive HTTP session.
"""

from __future__ import annotations

import email.utils
import urllib.parse
from collections.abc import Mapping

import requests


class HeatStylePoller:
    """Per deployment: HEAD its object; GET it when it changed since last seen.

    ``objects`` maps a deployment id to its object's ``container/name``;
    ``since`` is the epoch second each deployment last changed (Heat keeps
    it as the row's ``updated_at``).
    """

    def __init__(
        self,
        storage_url: str,
        token: str,
        objects: Mapping[str, str],
        since: Mapping[str, float],
    ) -> None:
        self.storage_url = storage_url.rstrip("/")
        self.objects = dict(objects)
        self.since = dict(since)
        self.session = requests.Session()
        self.session.headers["X-Auth-Token"] = token

    def _url(self, path: str) -> str:
        return f"{self.storage_url}/{urllib.parse.quote(path)}"

    def cycle(self) -> dict[str, bytes]:
        """One look at every deployment; the bodies of signals that landed."""
        landed: dict[str, bytes] = {}
        for deployment_id, path in self.objects.items():
            head = self.session.head(self._url(path), timeout=30)
            if head.status_code == 404:
                continue
            head.raise_for_status()
            modified = email.utils.parsedate_to_datetime(
                head.headers["Last-Modified"]
            ).timestamp()
            if modified <= self.since.get(deployment_id, 0.0):
                continue
            got = self.session.get(self._url(path), timeout=30)
            got.raise_for_status()
            self.since[deployment_id] = modified
            if got.content:
                landed[deployment_id] = got.content
        return landed

    def close(self) -> None:
        self.session.close()


__all__ = ["HeatStylePoller"]
