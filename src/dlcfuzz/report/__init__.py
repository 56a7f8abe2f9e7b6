"""``dlcfuzz report``: one self-contained static HTML page about a campaign (needs matplotlib)."""

from dlcfuzz.report.data import ReportError
from dlcfuzz.report.page import write_report

__all__ = ["ReportError", "write_report"]
