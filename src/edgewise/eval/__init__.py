"""Evaluation: data builders (``nq``: multi-document QA from NQ-open), tasks, backends, runner and
store, metrics, reports and calibration.

>>> from edgewise.eval.nq import normalize_answer
>>> normalize_answer("The  Beatles!")
'beatles'
"""
