"""The Berkeley Function-Calling Leaderboard's data (v4) as eval cases and schema tools, so that a
public category runs against a user's model through this library's schema rendering.

BFCL's files, as its repository lays them out: a question file (`BFCL_v4_<category>.json`: one
JSON object per line with `id`, `question` — turns of messages — and `function`, the function
docs), its ground truth (`possible_answer/BFCL_v4_<category>.json`: `id`, `ground_truth`), and for
the multi-turn categories the function docs of each backend class
(`multi_turn_func_doc/<file>.json`) and the classes themselves (BFCL's executable backends, which
the user provides: `backends=`).

What is converted, and how, follows BFCL's own inference and checker (`docs/reference/evals.md`,
"BFCL"): types mapped as its `GORILLA_TO_OPENAPI` table, `.` in a function name sent as `_` (as
BFCL does for OpenAI-style models), the non-executable categories scored on the first answer's
calls, the multi-turn ones by the backends' state and results after each turn.
"""

from __future__ import annotations

import ast
import copy
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._messages import AiMessage, ChatMessage, SystemMessage, UserMessage
from .._request import ToolSpecification
from ..loop._results import ToolChatResult
from ..loop._service import ToolService
from ..tools._base import ReturnBehavior
from ._cases import EvalCase, ExpectedCall, Turn
from ._run import CaseSetup

__all__ = ["BFCL_CATEGORIES", "BfclSuite", "load_bfcl"]

SINGLE_TURN = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "live_irrelevance",
)
MULTI_TURN = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
BFCL_CATEGORIES = SINGLE_TURN + MULTI_TURN
"""The categories `load_bfcl` converts. Not converted: Java and JavaScript (their values are
strings in those languages' syntax), `live_relevance` (any call passes), and the agentic ones
(web search, memory), whose checker reads the final answer's text."""

MAXIMUM_STEP_LIMIT = 20
"""BFCL's steps per turn in the multi-turn categories (a case's `max_rounds`)."""
ADDITIONAL_FUNCTION_PROMPT = (
    "I have updated some more functions you can choose from. What about now?"
)
"""What BFCL says in the turn where held-out functions are offered (its
`DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC`)."""

GORILLA_TO_OPENAPI = {
    "integer": "integer",
    "number": "number",
    "float": "number",
    "string": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "dict": "object",
    "object": "object",
    "tuple": "array",
    "any": "string",
    "byte": "integer",
    "short": "integer",
    "long": "integer",
    "double": "number",
    "char": "string",
    "ArrayList": "array",
    "Array": "array",
    "HashMap": "object",
    "Hashtable": "object",
    "Queue": "array",
    "Stack": "array",
    "Any": "string",
    "String": "string",
    "Bigint": "integer",
}
"""BFCL's type names -> JSON Schema's (its `constants/type_mappings.py`)."""

FUNC_DOC_FILES = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
    "WebSearchAPI": "web_search.json",
    "MemoryAPI_kv": "memory_kv.json",
    "MemoryAPI_vector": "memory_vector.json",
    "MemoryAPI_rec_sum": "memory_rec_sum.json",
}
"""Each backend class's function docs in `multi_turn_func_doc/` (BFCL's mapping); a class not
listed has its docs in `<ClassName>.json`."""


@dataclass
class BfclSuite:
    """BFCL entries as cases, and the tools each runs against (`setup`: the target to give
    `run_eval`)."""

    cases: list[EvalCase]
    category: str
    functions: dict[str, list[dict[str, Any]]] = field(repr=False)
    """Each case's function docs, by case id, as BFCL wrote them."""
    backends: Mapping[str, type] | None = field(default=None, repr=False)
    _multi: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    def setup(self, case: EvalCase) -> CaseSetup:
        """A fresh `ToolService` for one attempt of `case` (with fresh backends, for multi-turn)."""
        if case.id in self._multi:
            return self._multi_turn_setup(case)
        service = ToolService()
        for doc in self.functions[case.id]:
            # Never run: BFCL scores these calls as they are, and the run ends after them.
            service.register_spec(
                _specification(doc), _not_run, return_behavior=ReturnBehavior.IMMEDIATE
            )
        return CaseSetup(service=service)

    def _multi_turn_setup(self, case: EvalCase) -> CaseSetup:
        entry = self._multi[case.id]
        backends = self.backends or {}
        long_context = "long_context" in self.category
        model_side = _instances(entry, backends, long_context)
        truth_side = _instances(entry, backends, long_context)
        model_results: list[Any] = []
        service = ToolService()
        for doc, owner in entry["docs"]:
            method = getattr(model_side[owner], doc["name"])
            service.register_spec(_specification(doc), _recording(method, model_results))
        ground_truth: list[list[str]] = entry["ground_truth"]

        def after_turn(index: int, result: ToolChatResult[Any]) -> str | None:
            calls = ground_truth[index] if index < len(ground_truth) else []
            if not calls:
                return None
            expected = [_execute(text, truth_side) for text in calls]
            for name, truth in truth_side.items():
                differences = _differences(model_side[name], truth)
                if differences:
                    return (
                        f"the state of {name} differs from the ground truth's "
                        f"({', '.join(differences)})"
                    )
            missing = _missing(expected, model_results)
            if missing:
                shown = json.dumps(missing[0], default=str)[:200]
                return f"a ground truth call's result is missing from the model's: {shown}"
            return None

        return CaseSetup(service=service, after_turn=after_turn)


def load_bfcl(
    questions: str | Path,
    answers: str | Path | None = None,
    *,
    functions: str | Path | None = None,
    backends: Mapping[str, type] | object | None = None,
    limit: int | None = None,
) -> BfclSuite:
    """Read a BFCL v4 question file (and its ground truth) as cases.

    Args:
        questions: `BFCL_v4_<category>.json`.
        answers: Its ground truth; default: `possible_answer/<the same name>` beside it. The
            irrelevance categories have none.
        functions: The multi-turn function docs' folder; default: `multi_turn_func_doc` beside
            `questions`.
        backends: The multi-turn categories' executable classes (BFCL's
            `func_source_code`), by class name: a mapping, or an object (a module) whose
            attributes they are.
        limit: Read only the first `limit` entries.

    Raises:
        ValueError: A file cannot be read or is not in BFCL's format (the file and line say
            where), the category is not one of `BFCL_CATEGORIES`, or a multi-turn category
            lacks its function docs or backends.
    """
    questions = Path(questions)
    entries = list(_lines(questions, limit))
    if not entries:
        raise ValueError(f"{questions}: holds no entry")
    category = _category(questions, entries[0][1])
    irrelevance = category.endswith("irrelevance")
    truth: dict[str, Any] = {}
    if not irrelevance:
        answers = (
            Path(answers)
            if answers is not None
            else questions.parent / "possible_answer" / questions.name
        )
        truth = {entry["id"]: entry.get("ground_truth") for _, entry in _lines(answers, None)}
    suite = BfclSuite(cases=[], category=category, functions={})
    if category in MULTI_TURN:
        folder = (
            Path(functions) if functions is not None else questions.parent / "multi_turn_func_doc"
        )
        suite.backends = _backends(backends, entries)
        docs_cache: dict[str, list[dict[str, Any]]] = {}
        for line, entry in entries:
            suite.cases.append(
                _multi_turn_case(questions, line, entry, truth, folder, docs_cache, suite)
            )
        return suite
    for line, entry in entries:
        where = f"{questions}:{line}"
        case_id = _id(entry, where)
        docs = entry.get("function")
        if not isinstance(docs, list) or not docs:
            raise ValueError(f"{where}: no function docs (`function`)")
        suite.functions[case_id] = docs
        expected: list[ExpectedCall] = []
        if not irrelevance:
            if case_id not in truth:
                raise ValueError(f"{where}: {case_id!r} has no ground truth in {answers}")
            expected = _expected(truth[case_id], f"{answers}: {case_id}")
        suite.cases.append(
            EvalCase(
                id=case_id,
                input=_conversation(_first_turn(entry, where), where),
                expected_calls=expected,
                tags=[category],
            )
        )
    return suite


def _lines(path: Path, limit: int | None) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot be read: {exc}") from None
    count = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if limit is not None and count >= limit:
            return
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ValueError(f"{path}:{number}: not a JSON object")
        count += 1
        yield number, value


def _id(entry: Mapping[str, Any], where: str) -> str:
    value = entry.get("id")
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}: no `id`")
    return value


def _category(path: Path, entry: Mapping[str, Any]) -> str:
    case_id = _id(entry, f"{path}:1")
    category = case_id.rsplit("_", 1)[0]
    if category not in BFCL_CATEGORIES:
        raise ValueError(
            f"{path}: the category {category!r} is not converted; "
            f"these are: {', '.join(BFCL_CATEGORIES)}"
        )
    return category


def _first_turn(entry: Mapping[str, Any], where: str) -> list[Any]:
    turns = entry.get("question")
    if not isinstance(turns, list) or not turns or not isinstance(turns[0], list):
        raise ValueError(f"{where}: `question` is not a list of turns of messages")
    return turns[0]


def _conversation(messages: Sequence[Any], where: str) -> list[ChatMessage]:
    converted: list[ChatMessage] = []
    for message in messages:
        role = message.get("role") if isinstance(message, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise ValueError(f"{where}: a message without text `content`")
        if role == "user":
            converted.append(UserMessage(content=content))
        elif role == "system":
            converted.append(SystemMessage(text=content))
        elif role == "assistant":
            converted.append(AiMessage(text=content))
        else:
            raise ValueError(f"{where}: a message of role {role!r}")
    return converted


def _name(bfcl_name: str) -> str:
    """The name a tool is offered under: BFCL's, `.` replaced by `_` (as BFCL sends it to
    OpenAI-style models, whose tool names take no dot)."""
    return bfcl_name.replace(".", "_")


def _expected(ground_truth: Any, where: str) -> list[ExpectedCall]:
    if not isinstance(ground_truth, list):
        raise ValueError(f"{where}: `ground_truth` is not a list")
    calls: list[ExpectedCall] = []
    for item in ground_truth:
        if not isinstance(item, dict) or len(item) != 1:
            raise ValueError(f"{where}: a ground truth call is not {{name: arguments}}")
        ((name, arguments),) = item.items()
        if not isinstance(arguments, dict):
            raise ValueError(f"{where}: the arguments of {name!r} are not an object")
        calls.append(ExpectedCall(name=_name(name), arguments=arguments))
    return calls


def _specification(doc: Mapping[str, Any]) -> ToolSpecification:
    parameters = copy.deepcopy(doc.get("parameters") or {})
    parameters["type"] = "object"
    parameters["properties"] = _properties(parameters.get("properties") or {})
    if not isinstance(parameters.get("required", []), list):
        del parameters["required"]
    parameters.pop("optional", None)
    return ToolSpecification(
        name=_name(str(doc.get("name"))),
        description=str(doc.get("description") or ""),
        parameters=parameters,
    )


def _properties(properties: dict[str, Any]) -> dict[str, Any]:
    """BFCL's `_cast_to_openai_type`: types mapped (a missing or unknown one is `string`), a
    float typed `number` with `format: float` and said so in its description; nested
    properties and items too (BFCL maps two levels; here every level)."""
    for key, value in properties.items():
        if not isinstance(value, dict):
            properties[key] = {"type": "string"}
            continue
        _cast(value)
    return properties


def _cast(schema: dict[str, Any]) -> None:
    kind = schema.get("type")
    if kind == "float":
        schema["format"] = "float"
        schema["description"] = str(schema.get("description", "")) + " This is a float type value."
    schema["type"] = GORILLA_TO_OPENAPI.get(kind, "string") if isinstance(kind, str) else "string"
    if "required" in schema and not isinstance(schema["required"], list):
        # BFCL writes `"required": true` on some properties: not JSON Schema, said in words.
        schema["description"] = (
            f"{schema.get('description', '')} Required: {schema.pop('required')}."
        )
    schema.pop("optional", None)
    if isinstance(schema.get("properties"), dict):
        _properties(schema["properties"])
    if isinstance(schema.get("items"), dict):
        _cast(schema["items"])


def _not_run(arguments: dict[str, Any]) -> None:
    return None


# -- multi-turn ---------------------------------------------------------------------------------


def _backends(
    given: Mapping[str, type] | object | None, entries: Sequence[tuple[int, Any]]
) -> dict[str, type]:
    needed = sorted({name for _, e in entries for name in e.get("involved_classes") or ()})
    if given is None:
        raise ValueError(
            "the multi-turn categories run BFCL's executable backends: pass backends= (a "
            f"mapping or module holding {', '.join(needed)}; CLI: --bfcl-backends MOD:ATTR)"
        )
    found: dict[str, type] = {}
    for name in needed:
        value = given.get(name) if isinstance(given, Mapping) else getattr(given, name, None)
        if not isinstance(value, type):
            raise ValueError(f"the backends hold no class {name!r} (needed by the cases)")
        found[name] = value
    return found


def _multi_turn_case(
    questions: Path,
    line: int,
    entry: Mapping[str, Any],
    truth: Mapping[str, Any],
    folder: Path,
    docs_cache: dict[str, list[dict[str, Any]]],
    suite: BfclSuite,
) -> EvalCase:
    where = f"{questions}:{line}"
    case_id = _id(entry, where)
    classes = entry.get("involved_classes")
    if not isinstance(classes, list) or not classes:
        raise ValueError(f"{where}: no `involved_classes`")
    docs: dict[str, tuple[dict[str, Any], str]] = {}
    for owner in classes:
        for doc in _docs(folder, str(owner), docs_cache):
            docs[str(doc.get("name"))] = (
                doc,
                str(owner),
            )  # a later class's method wins, as in BFCL
    held: dict[int, list[str]] = {}
    for turn, names in (entry.get("missed_function") or {}).items():
        held[int(turn)] = [_name(str(n)) for n in names]
    withheld = {name for names in held.values() for name in names}
    all_names = [_name(name) for name in docs]
    turns_raw = entry.get("question")
    if not isinstance(turns_raw, list) or not turns_raw:
        raise ValueError(f"{where}: `question` is not a list of turns")
    ground_truth = truth.get(case_id)
    if not isinstance(ground_truth, list) or len(ground_truth) != len(turns_raw):
        raise ValueError(f"{where}: {case_id!r} has no ground truth of one list per turn")
    for calls in ground_truth:
        for text in calls:
            _parse_call(text, f"{case_id}: ground truth")
    turns: list[Turn] = []
    for index, messages in enumerate(turns_raw):
        if index in held and not messages:
            messages = [{"role": "user", "content": ADDITIONAL_FUNCTION_PROMPT}]
        turns.append(
            Turn(
                input=_conversation(messages, f"{where}: turn {index}"),
                expected_calls=[] if not ground_truth[index] else None,
                tools=all_names if index in held and index > 0 else None,
            )
        )
    suite.functions[case_id] = [doc for doc, _ in docs.values()]
    suite._multi[case_id] = {
        "docs": list(docs.values()),
        "classes": [str(c) for c in classes],
        "initial_config": entry.get("initial_config") or {},
        "ground_truth": ground_truth,
    }
    first = turns[0]
    return EvalCase(
        id=case_id,
        input=first.input,
        expected_calls=first.expected_calls,
        tools=[n for n in all_names if n not in withheld] if withheld else None,
        turns=turns[1:],
        max_rounds=MAXIMUM_STEP_LIMIT,
        tags=[suite.category],
    )


def _docs(folder: Path, owner: str, cache: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    if owner not in cache:
        path = folder / FUNC_DOC_FILES.get(owner, f"{owner}.json")
        cache[owner] = [doc for _, doc in _lines(path, None)]
    return cache[owner]


def _instances(
    entry: Mapping[str, Any], backends: Mapping[str, type], long_context: bool
) -> dict[str, Any]:
    instances: dict[str, Any] = {}
    for name in entry["classes"]:
        instance = backends[name]()
        load = getattr(instance, "_load_scenario", None)
        if load is not None:
            load(copy.deepcopy(entry["initial_config"].get(name, {})), long_context=long_context)
        instances[name] = instance
    return instances


def _recording(method: Callable[..., Any], results: list[Any]) -> Callable[[dict[str, Any]], Any]:
    def call(arguments: dict[str, Any]) -> Any:
        try:
            value = method(**arguments)
        except Exception as exc:
            results.append(f"Error during execution: {exc}")
            raise
        results.append(value)
        return value

    return call


def _parse_call(text: Any, where: str) -> tuple[str, list[Any], dict[str, Any]]:
    """A ground truth call (`cd(folder='document')`): its name and literal arguments."""
    try:
        node = ast.parse(str(text), mode="eval").body
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            raise ValueError("not a call of a function by name")
        args = [ast.literal_eval(arg) for arg in node.args]
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
    except (SyntaxError, ValueError) as exc:
        raise ValueError(f"{where}: {text!r} is not a call with literal arguments: {exc}") from None
    return node.func.id, args, kwargs


def _execute(text: str, instances: Mapping[str, Any]) -> Any:
    name, args, kwargs = _parse_call(text, "ground truth")
    for instance in reversed(list(instances.values())):
        method = getattr(instance, name, None)
        if method is not None and not name.startswith("_"):
            try:
                return method(*args, **kwargs)
            except Exception as exc:
                return f"Error during execution: {exc}"
    return f"Error during execution: no backend has {name!r}"


def _differences(model: object, truth: object) -> list[str]:
    """The public attributes where the model's backend differs from the ground truth's."""
    return [
        name
        for name, value in vars(truth).items()
        if not name.startswith("_") and getattr(model, name, None) != value
    ]


def _missing(expected: Sequence[Any], got: Sequence[Any]) -> list[Any]:
    """The expected results that `got` lacks, each counted as often as it appears (BFCL's
    `_is_subsequence_unordered`)."""
    left = list(got)
    missing: list[Any] = []
    for item in expected:
        try:
            left.remove(item)
        except ValueError:
            missing.append(item)
    return missing
