"""Evals for tool calling: does a model call your tools right, with this schema, this docstring?

Write cases (`load_cases`: JSON lines, or YAML), run them against a model through the tool loop
(`run_eval`, `arun_eval`), read the `EvalReport` (tool selection, arguments, irrelevance, pass^k,
rounds, latency, tokens, cost; `render_html` makes it a page), and `compare` it with an earlier run. `load_bfcl` turns the
Berkeley Function-Calling Leaderboard's data files into cases and tools. The command line:
`agentforge-typed eval`. Guide: `docs/guide/evals.md`; reference: `docs/reference/evals.md`.
"""

from ._bfcl import BFCL_CATEGORIES, BfclSuite, load_bfcl
from ._cases import CasesError, EvalCase, ExpectedCall, Turn, cases_from, load_cases
from ._html import render_html
from ._report import (
    REPORT_VERSION,
    ArgumentCheck,
    Attempt,
    AttemptError,
    CallCheck,
    CaseChange,
    CaseReport,
    CheckOutcome,
    Comparison,
    EvalReport,
    OutputCheck,
    Rate,
    SentCall,
    Summary,
    Tokens,
    ToolStats,
    TurnScore,
    compare,
)
from ._run import CaseSetup, EvalSetupError, EvalTarget, arun_eval, run_eval

__all__ = [
    "BFCL_CATEGORIES",
    "REPORT_VERSION",
    "ArgumentCheck",
    "Attempt",
    "AttemptError",
    "BfclSuite",
    "CallCheck",
    "CaseChange",
    "CaseReport",
    "CaseSetup",
    "CasesError",
    "CheckOutcome",
    "Comparison",
    "EvalCase",
    "EvalReport",
    "EvalSetupError",
    "EvalTarget",
    "ExpectedCall",
    "OutputCheck",
    "Rate",
    "SentCall",
    "Summary",
    "Tokens",
    "ToolStats",
    "Turn",
    "TurnScore",
    "arun_eval",
    "cases_from",
    "compare",
    "load_bfcl",
    "render_html",
    "load_cases",
    "run_eval",
]
