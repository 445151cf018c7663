"""perfcheck: GPU kernel performance, testable in CI.

Data flows one way: ingest -> metrics -> checks -> reports. The public entry
points for reading are ``perfcheck.ingest.read_profile`` and ``read_peaks``.
"""

__version__ = "0.1.0.dev0"
