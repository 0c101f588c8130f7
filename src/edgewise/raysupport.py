"""Connecting to Ray, the same way for every command that runs on it (``batch``, ``eval run``, ``serve``).

``address`` is what ``ray.init`` takes: ``auto`` (a cluster started on this machine with ``ray start
--head``), ``HOST:PORT``, ``ray://HOST:10001``; ``None`` or ``"local"`` starts a local instance for
this process. A process already connected keeps its connection. Ray is imported here only.
"""

from __future__ import annotations

from typing import Any

from .errors import ConfigError


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ImportError("running on Ray needs ray: pip install -e '.[ray]' (in an edgewise checkout)") from None
    return ray


def connect(address: str | None, **init: Any) -> bool:
    """Connect this process to Ray at ``address``; ``True`` if this call connected (the caller then
    calls ``ray.shutdown()`` when done), ``False`` if the process was already connected."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    try:
        if address is None or address == "local":
            ray.init(address="local", include_dashboard=False, **init)
        else:
            ray.init(address=address, **init)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise ConfigError(f"could not connect to Ray at {address!r}: {exc}; give 'auto' (a cluster started on this "
                          "machine with `ray start --head`), HOST:PORT, ray://HOST:10001 or 'local'") from None
    return True
