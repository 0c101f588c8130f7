"""The edgewise HTTP API: the ``/v1`` endpoints, one per library call, and what serves them.

- :mod:`.routes`: the endpoints, the probes and ``/metrics``; :mod:`.schemas`: their request and
  response bodies (validation and ``/openapi.json``); :mod:`.codec`: JSON in and out of them.
- :mod:`.work`: what each endpoint does (one library call); :mod:`.assets`: the files a request
  may name, read only from ``--assets DIR``.
- :mod:`.cost`: the model texts a request would cost, estimated before it runs; :mod:`.admission`:
  the server's work policy by that cost (refused, queued, or served apart).
- :mod:`.auth`: the optional bearer-token check; :mod:`.metrics`: Prometheus metrics and the
  access log; :mod:`.warmup`: one request to each endpoint before the server listens.
- :mod:`.ui`: ``/ui``, the inspector page, built on the endpoints above; :mod:`.inspector`: the
  page itself (its files, the view of a pack, the self-contained file ``--html`` writes).

The proxy (:mod:`edgewise.serve.proxy`) packs with the same options, cost, work and metrics.
"""
