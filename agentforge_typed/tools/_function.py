"""`@tool`: a typed function (or method) as a tool the model can call.

Decoration does the work once: the arguments' validator and JSON Schema from the signature and
the docstring, and the result converter (the `args_model` and the result serializer are built at
first use). A call is then validate → run → convert, each failure an error result the model can
read (`ToolExecutionResult`), never an exception.
"""

from __future__ import annotations

import copy
import functools
import inspect
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Concatenate, Generic, Literal, ParamSpec, Protocol, TypeVar, cast, overload

from pydantic import BaseModel, ValidationError
from typing_extensions import Self, TypedDict, Unpack

from .._exceptions import ToolArgumentsError
from .._messages import ToolCall
from .._records import ToolExecutionResult
from .._request import ToolAnnotations, ToolSpecification
from .._sync import run_sync
from ._arguments import ArgumentsValidator
from ._base import (
    ApprovalPolicy,
    ContentURLs,
    ExtraArguments,
    ReturnBehavior,
    ToolContext,
    check_content_urls,
    check_extra_arguments,
    check_options,
)
from ._budget import DEFAULT_MAX_RESULT_CHARS, check_max_result_chars, cut_result
from ._cache import CachedCalls, ResultCache, check_cache
from ._invoke import NEVER_AWAITABLE, ainvoke, invoke, is_async_callable, is_awaitable
from ._outcomes import (
    UnreadableValue,
    arguments_error_result,
    asuccess_result,
    failure_result,
    success_result,
    unreadable_result,
)
from ._result_text import DeclaredResultText, ResultConverter
from ._returns import CONTENT_CARRIERS, value_annotation
from ._signature import check_tool_name, inspect_function, type_name

__all__ = ["Tool", "ToolDecorator", "ToolOptions", "tool"]

P = ParamSpec("P")
P2 = ParamSpec("P2")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)
T = TypeVar("T")

_Binding = Literal["function", "instance", "class"]


class ToolOptions(TypedDict, total=False):
    """The keyword options of `@tool(...)` and `Tool(...)`, each optional (defaults below)."""

    name: str | None
    """The name the model calls the tool by; the function's name by default."""
    description: str | None
    """Overrides the docstring's summary and long description."""
    strict: bool
    """Validate in pydantic's strict mode (default `True`); `False` allows lax coercion."""
    strict_schema: bool
    """Ask the provider to enforce the schema (OpenAI `strict: true`); default `False`."""
    return_behavior: ReturnBehavior
    """What happens to the result (see `ReturnBehavior`); default `TO_LLM`."""
    max_retries: int
    """Invalid-argument attempts the model gets before `ToolArgumentsError` (default 2)."""
    timeout: float | None
    """Seconds a call may run before it becomes a timeout error result (default `None`: none)."""
    sequential: bool
    """Never run concurrently with the other calls of a round (default `False`)."""
    result_converter: Callable[[Any], str] | None
    """`result -> str` for the model, instead of the default conversion."""
    extra_arguments: ExtraArguments
    """`"forbid"` (default) reports unknown arguments; `"ignore"` drops them (recorded)."""
    requires_approval: ApprovalPolicy
    """Pause a `ToolService` run on the tool's calls until a person decides: `True`, or a sync or
    async `(call, context) -> bool` deciding per call (default `False`)."""
    external: bool
    """The program executes the tool elsewhere: a run pauses on its calls for their results
    (default `False`)."""
    retry_safe: bool
    """A call interrupted while it ran (its process died) may run again: the tool has no effect
    a second run repeats, or it passes `ToolContext.idempotency_key` (the same for the call
    again) to what it calls. A stored run then runs such a call again; any other interrupted
    call's result is an error the model reads (default `False`)."""
    max_result_chars: int | None
    """The most characters of a result's text the model reads (at least 100); a longer text keeps
    its head and tail around a marker saying how many were cut. Default `None`: the
    `ToolService`'s `max_result_chars`, else 100,000 (`DEFAULT_MAX_RESULT_CHARS`)."""
    content_urls: ContentURLs
    """Which links the parts the tool returns may carry to the model's provider: `"https"` (the
    default: `https://` to public hosts only), `"http"` (`http://` too) or `"any"` (any link,
    unchecked: for a tool whose links point into your own network). A link it does not allow is
    left out, a note in its place (`agentforge_typed.tools.ContentURLs`)."""
    annotations: ToolAnnotations | None
    """What the tool says about its behaviour (a title; read-only, destructive, idempotent, open
    world): hints for the clients of a served tool (MCP tool annotations), on
    `specification.annotations`; the loop acts on none of them, and `cache=` requires
    `read_only=True` (default `None`: says nothing)."""
    cache: float | ResultCache | None
    """Keep the tool's successful results and answer identical calls with them: a TTL in seconds
    (an in-memory `MemoryCache`), or a `ResultCache`. Keyed by the validated arguments, the
    conversation (unless `cache_shared`) and the deps' `cache_key`; identical calls in flight
    run the body once. Only for a tool declared `annotations=ToolAnnotations(read_only=True)`
    that needs no approval, unless `cache_force`; never for an external tool or a method (its
    instance is not part of the key). Default `None`: no cache."""
    cache_shared: bool
    """The cached result is the same for every conversation (public data): served across
    conversations, and outside a run. Default `False`: a conversation's results serve only it."""
    cache_force: bool
    """Cache a tool that is not declared read-only, or that needs approval (default `False`)."""


class Tool(Generic[P, R]):
    """A function the model can call, still callable exactly like the function.

    Build it with `@tool` (or `Tool(function, **options)`, see `ToolOptions`). Accessed through an
    instance, a method tool is bound: `self` is neither in its schema nor in its arguments.

    Attributes:
        name: The name the model calls it by (the function's name unless given).
        description: From `description=` or the docstring (summary and long description).
        specification: What is offered to the model: name, description, JSON Schema.
        args_model: The pydantic model of the arguments, built from the signature at first use
            (calls validate without it).
        strict: Validate in pydantic's strict mode (no `"5"` → `5`).
        return_behavior: What happens to the result (see `ReturnBehavior`).
        max_retries: How many invalid-argument attempts a `ToolService` sends back to the model.
        timeout: Seconds a call may run; `None` for no limit.
        sequential: Never run concurrently with other calls of a round.
        extra_arguments: `"forbid"` reports unknown arguments, `"ignore"` drops them (recorded).
        deps_type: The `X` of its `ToolContext[X]` parameter (`Any` without one): a `ToolService`
            with a `deps_type` refuses to register a tool whose `X` does not accept it.
        requires_approval: Whether a `ToolService` run pauses on its calls for a person's
            decision: a bool, or a sync or async `(call, context) -> bool` per call.
        external: The program runs it elsewhere: a run pauses on its calls for their results.
        retry_safe: Whether a stored run runs a call interrupted by a crash again.
        max_result_chars: Its own result budget (characters the model reads of a result), or
            `None` for the service's (else the default, 100,000).
        content_urls: Which links the parts it returns may carry (`"https"`, `"http"`, `"any"`).
        cache: Its `ResultCache` (`cache=`), or `None`.
    """

    # The private per-call state in slots: reading a slot is cheaper than reading an instance
    # `__dict__` (which `functools.update_wrapper` needs, so there is one too).
    __slots__ = (
        "__dict__",
        "__weakref__",
        "_attribute",
        "_binding",
        "_bound",
        "_cached",
        "_context_parameter",
        "_convert",
        "_direct_call",
        "_function",
        "_is_async",
        "_max_result",
        "_positional",
        "_signature",
        "_strict",
        "_validate_fields",
        "_validator",
    )

    # Set by `functools.update_wrapper`: a tool still reads like its function.
    __name__: str
    __qualname__: str
    # The undecorated callable (a bound method tool keeps its class's function).
    __wrapped__: Callable[..., R]

    name: str
    description: str
    specification: ToolSpecification
    strict: bool
    return_behavior: ReturnBehavior
    max_retries: int
    timeout: float | None
    sequential: bool
    extra_arguments: ExtraArguments
    deps_type: Any
    requires_approval: ApprovalPolicy
    external: bool
    retry_safe: bool
    max_result_chars: int | None
    content_urls: ContentURLs
    cache: ResultCache | None

    def __init__(
        self,
        function: Callable[P, R],
        *,
        namespace: Mapping[str, Any] | None = None,
        **options: Unpack[ToolOptions],
    ) -> None:
        check_options(options, ToolOptions, "@tool")
        name = options.get("name")
        description = options.get("description")
        strict = options.get("strict", True)
        strict_schema = options.get("strict_schema", False)
        timeout = options.get("timeout")
        extra_arguments = options.get("extra_arguments", "forbid")
        result_converter = options.get("result_converter")
        binding: _Binding = "function"
        target: Any = function
        if isinstance(target, staticmethod):
            target = target.__func__
        elif isinstance(target, classmethod):
            target, binding = target.__func__, "class"
        elif _defined_in_class_body(target):
            binding = "instance"
        if not callable(target):
            raise TypeError(f"@tool needs a function, got {target!r}")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"tool timeout must be positive, got {timeout!r}")
        check_extra_arguments(extra_arguments)

        if inspect.isgeneratorfunction(target) or inspect.isasyncgenfunction(target):
            raise TypeError(
                f"@tool cannot wrap the generator function {target.__qualname__!r}: a tool "
                "returns one result; collect the items into a list and return that"
            )
        self.name = check_tool_name(name if name is not None else _default_name(target), target)
        signature = inspect_function(
            target, name=self.name, has_receiver=binding != "function", localns=namespace
        )
        self.description = description if description is not None else signature.description
        self._signature = signature
        self.specification = ToolSpecification(
            name=self.name,
            description=self.description,
            parameters=signature.parameters,
            strict_schema=strict_schema,
            annotations=options.get("annotations"),
        )
        self.strict = strict
        self.return_behavior = options.get("return_behavior", ReturnBehavior.TO_LLM)
        self.max_retries = options.get("max_retries", 2)
        self.timeout = timeout
        self.sequential = options.get("sequential", False)
        self.extra_arguments = extra_arguments
        self.deps_type = signature.deps_type
        self.requires_approval = options.get("requires_approval", False)
        self.external = options.get("external", False)
        self.retry_safe = options.get("retry_safe", False)
        self.max_result_chars = check_max_result_chars(options.get("max_result_chars"))
        self._max_result = (
            DEFAULT_MAX_RESULT_CHARS if self.max_result_chars is None else self.max_result_chars
        )
        self.content_urls = check_content_urls(options.get("content_urls", "https"))
        self._cached = _cached_calls(self, options, binding)
        self.cache = None if self._cached is None else self._cached.cache

        self._function: Callable[..., Any] = target
        self._binding: _Binding = binding
        self._bound = binding == "function"
        self._attribute: str | None = None
        self._is_async = is_async_callable(target)
        # The arguments validate into a dict keyed by parameter name, no `args_model` instance.
        self._validator = ArgumentsValidator(
            signature.validator,
            signature.core_schema,
            signature.argument_names,
            strict=strict,
            extra_arguments=extra_arguments,
            null_means_default=signature.parameters if strict_schema else None,
        )
        self._validate_fields = self._validator.validate_json
        self._strict = self._validator.strict
        self._convert: ResultConverter = (
            result_converter
            if result_converter is not None
            else DeclaredResultText(value_annotation(signature.return_annotation))
        )
        self._context_parameter = signature.context_parameter
        self._positional = signature.positional
        # The common case (sync, no timeout, arguments passed as they are) skips all plumbing.
        self._direct_call = not (
            signature.context_parameter
            or signature.positional
            or self._is_async
            or timeout is not None
            or self._cached is not None
        )
        functools.update_wrapper(self, target)

    def __repr__(self) -> str:
        return f"<Tool {self.name!r} of {self._function!r}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the function itself, with no validation."""
        return cast(R, self._function(*args, **kwargs))

    # --- methods -------------------------------------------------------------------------------

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self._attribute = name

    @overload
    def __get__(self, instance: None, owner: type[Any] | None = None) -> Self: ...

    @overload
    def __get__(
        self: Tool[Concatenate[T, P2], R], instance: T, owner: type[Any] | None = None
    ) -> Tool[P2, R]: ...

    def __get__(self, instance: Any, owner: type[Any] | None = None) -> Any:
        if self._bound:
            return self
        if self._binding == "class":
            receiver = owner if owner is not None else type(instance)
        elif instance is None:
            return self
        else:
            receiver = instance
        bound = copy.copy(self)
        bound._function = self._function.__get__(receiver, owner)
        bound._bound = True
        if instance is not None and self._attribute and hasattr(instance, "__dict__"):
            # A tool is a non-data descriptor: the next lookup finds this bound copy directly.
            instance.__dict__[self._attribute] = bound
        return bound

    # --- arguments -----------------------------------------------------------------------------

    @property
    def args_model(self) -> type[BaseModel]:
        """The pydantic model of the arguments, built from the signature (at first use)."""
        return self._signature.args_model

    def validate_arguments(self, arguments: str | bytes) -> BaseModel:
        """Validate raw JSON arguments, applying (and only applying) the envelope repairs.

        Returns:
            An instance of `args_model`.

        Raises:
            ToolArgumentsError: listing each problem with its JSON path, message and input.
        """
        outcome = self._validator.validate(arguments)
        if outcome.arguments is None:
            raise ToolArgumentsError(self.name, outcome.errors)
        fields, _, given = outcome.arguments
        return self._signature.args_instance(fields, given)

    def _call_arguments(
        self, fields: dict[str, Any], context: ToolContext[Any] | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """`(args, kwargs)` for the function, from the validated arguments (left unchanged)."""
        values = dict(fields)
        if self._context_parameter:
            values[self._context_parameter] = context
        positional = tuple(values.pop(key) for key in self._positional)
        return positional, values

    # --- execution -----------------------------------------------------------------------------

    def execute(
        self, call: ToolCall, context: ToolContext[Any] | None = None, *, deps: Any = None
    ) -> ToolExecutionResult:
        """Validate the call's arguments, run the tool and convert its result, blocking.

        A failed call (invalid arguments, `ModelRetry`, any exception — `SystemExit` included —, a
        timeout) gives an error result; only `KeyboardInterrupt` and the cancellation of the
        running task propagate. Without a `context`, one is built from `call` and `deps`.
        """
        if not self._bound:
            self._refuse_unbound()
        # The fast path inlined, as it is the per-call cost that matters: a valid call of a plain
        # sync function. Repaired arguments, context, renames, async and timeouts take `_run`.
        try:
            fields = self._validate_fields(call.arguments, strict=self._strict)[0]
        except ValidationError as error:
            try:
                outcome = self._validator.repair(call.arguments, error)
            except BaseException as exc:  # see below
                return failure_result(self.name, exc)
            if outcome.arguments is None:
                # `outcome.error_result` inlined: a typed tool's schema cannot fail.
                return arguments_error_result(self.name, outcome.errors, outcome.repairs)
            return self._run(outcome.arguments[0], outcome.repairs, call, context, deps)
        except BaseException as exc:
            # Not a validation error: the argument types' own code raised (a `KeyError` in a
            # `field_validator`). The tool failed, as when its body raises: an execution error.
            return failure_result(self.name, exc)
        if not self._direct_call:
            return self._run(fields, (), call, context, deps)
        try:
            value = self._function(**fields)
            # A sync function that returns an awaitable (e.g. a sync wrapper of an async one),
            # whatever its annotation says: awaited, as under `aexecute`. The plain types are
            # ruled out by a set lookup, cheaper than a call.
            if value.__class__ not in NEVER_AWAITABLE and is_awaitable(value):
                value = _awaited(value)
        except BaseException as exc:  # all but the uncontained: see `failure_result`
            return failure_result(self.name, exc)
        # The body ran: from here a failure is a result that could not be read, not a failure.
        try:
            # `success_result` inlined, positional: a call and keyword arguments would cost about
            # as much as building the result itself.
            if value.__class__ in CONTENT_CARRIERS:
                return success_result(value, (), self._convert, self._max_result, self.content_urls)
            text = self._convert(value)
        except UnreadableValue as exc:
            return unreadable_result(self.name, exc.error, exc.value)
        except BaseException as exc:  # all but the uncontained: see `unreadable_result`
            return unreadable_result(self.name, exc, value)
        if len(text) > self._max_result:
            return cut_result(text, self._max_result, value)
        return ToolExecutionResult(text, value)

    async def aexecute(
        self, call: ToolCall, context: ToolContext[Any] | None = None, *, deps: Any = None
    ) -> ToolExecutionResult:
        """Like `execute`, without blocking the event loop: a sync tool runs in a worker thread."""
        if not self._bound:
            self._refuse_unbound()
        # The same validator as `execute`'s.
        try:
            outcome = self._validator.validate(call.arguments)
        except BaseException as exc:  # the argument types' own code raised: see `execute`
            return failure_result(self.name, exc)
        if outcome.arguments is None:
            return outcome.error_result(self.name)
        repairs = outcome.repairs
        if self._cached is not None:
            return await self._acached(outcome.arguments[0], repairs, call, context, deps)
        return await self._abody(outcome.arguments[0], repairs, call, context, deps)

    async def _abody(
        self,
        fields: dict[str, Any],
        repairs: tuple[str, ...],
        call: ToolCall,
        context: ToolContext[Any] | None,
        deps: Any,
    ) -> ToolExecutionResult:
        """`aexecute` once the arguments are valid: run the tool, convert its value."""
        try:
            args, kwargs = self._call_arguments(fields, self._context(call, context, deps))
            value = await ainvoke(
                self._function, args, kwargs, timeout=self.timeout, is_async=self._is_async
            )
            if value.__class__ in CONTENT_CARRIERS:
                return await asuccess_result(
                    value, repairs, self._convert, self._max_result, self.content_urls
                )
            return success_result(value, repairs, self._convert, self._max_result)
        except BaseException as exc:  # all but the uncontained: see `failure_result`
            return failure_result(self.name, exc, repairs)

    def _run(
        self,
        fields: dict[str, Any],
        repairs: tuple[str, ...],
        call: ToolCall,
        context: ToolContext[Any] | None,
        deps: Any,
    ) -> ToolExecutionResult:
        """`execute` beyond its fast path."""
        if self._cached is not None:
            return self._cached_run(fields, repairs, call, context, deps)
        return self._body(fields, repairs, call, context, deps)

    def _body(
        self,
        fields: dict[str, Any],
        repairs: tuple[str, ...],
        call: ToolCall,
        context: ToolContext[Any] | None,
        deps: Any,
    ) -> ToolExecutionResult:
        try:
            args, kwargs = self._call_arguments(fields, self._context(call, context, deps))
            value = invoke(
                self._function, args, kwargs, timeout=self.timeout, is_async=self._is_async
            )
            return success_result(
                value, repairs, self._convert, self._max_result, self.content_urls
            )
        except BaseException as exc:  # all but the uncontained: see `failure_result`
            return failure_result(self.name, exc, repairs)

    def _cache_key(
        self,
        fields: dict[str, Any],
        repairs: tuple[str, ...],
        context: ToolContext[Any] | None,
        deps: Any,
    ) -> str | ToolExecutionResult | None:
        """The call's key in the cache; `None` when the cache leaves the call alone, or the
        failure result when making the key raised (all but the uncontained: see
        `failure_result`)."""
        cached = self._cached
        assert cached is not None
        if context is not None:
            deps = context.deps
        try:
            return cached.key(self.name, fields, getattr(context, "conversation_id", None), deps)
        except BaseException as exc:
            return failure_result(self.name, exc, repairs)

    def _cached_run(
        self,
        fields: dict[str, Any],
        repairs: tuple[str, ...],
        call: ToolCall,
        context: ToolContext[Any] | None,
        deps: Any,
    ) -> ToolExecutionResult:
        """`_run` of a cached tool: a hit, the identical call in flight, or the body."""
        key = self._cache_key(fields, repairs, context, deps)
        if key is None:
            return self._body(fields, repairs, call, context, deps)
        if not isinstance(key, str):
            return key
        assert self._cached is not None
        return self._cached.run(
            key, self.name, repairs, lambda: self._body(fields, repairs, call, context, deps)
        )

    async def _acached(
        self,
        fields: dict[str, Any],
        repairs: tuple[str, ...],
        call: ToolCall,
        context: ToolContext[Any] | None,
        deps: Any,
    ) -> ToolExecutionResult:
        """`_cached_run` for `aexecute`."""
        key = self._cache_key(fields, repairs, context, deps)
        if key is None:
            return await self._abody(fields, repairs, call, context, deps)
        if not isinstance(key, str):
            return key
        assert self._cached is not None
        return await self._cached.arun(
            key, self.name, repairs, lambda: self._abody(fields, repairs, call, context, deps)
        )

    def _context(
        self, call: ToolCall, context: ToolContext[Any] | None, deps: Any
    ) -> ToolContext[Any] | None:
        if context is not None or not self._context_parameter:
            return context
        return ToolContext(deps=deps, tool_call_id=call.id, tool_name=self.name)

    def unserializable_return(self) -> str | None:
        """Why the declared return type cannot be sent to the model as JSON, or `None`.

        Builds the result serializer, which decoration leaves to the first call; a
        `result_converter=` answers for itself."""
        convert = self._convert
        if not isinstance(convert, DeclaredResultText) or (problem := convert.prepare()) is None:
            return None
        return (
            f"its return type {type_name(convert.annotation)} cannot be serialized to JSON for "
            f"the model ({problem}): return a pydantic model, a dataclass, a "
            "TypedDict or a str, or give @tool a result_converter="
        )

    def require_bound(self) -> None:
        """Raise `TypeError` for a method tool taken from its class rather than an instance: it
        has no `self` to run with."""
        if not self._bound:
            self._refuse_unbound()

    def _refuse_unbound(self) -> None:
        raise TypeError(
            f"tool `{self.name}` is a method: execute it through an instance (obj.{self.name})"
        )


def _cached_calls(
    tool: Tool[Any, Any], options: ToolOptions, binding: _Binding
) -> CachedCalls | None:
    """The cache `cache=` asks for, or `None`; refuses the tools whose results must not be kept.

    Raises:
        ValueError: A cached tool that may change something or waits for a decision (unless
            `cache_force`), an external one, `cache_shared`/`cache_force` without `cache`.
        TypeError: `cache=` of the wrong type, or on a method.
    """
    cache = options.get("cache")
    shared, force = options.get("cache_shared", False), options.get("cache_force", False)
    if cache is None:
        if shared or force:
            raise ValueError(f"tool `{tool.name}`: cache_shared and cache_force need cache=")
        return None
    refused = f"tool `{tool.name}` cannot be cached"
    if tool.external:
        raise ValueError(f"{refused}: it is external (its results come from elsewhere)")
    if binding == "instance":
        raise TypeError(
            f"{refused}: it is a method, whose instance is not part of the cache key; cache a "
            "function, a staticmethod or a classmethod"
        )
    if not force:
        annotations = tool.specification.annotations
        if annotations is None or annotations.read_only is not True:
            raise ValueError(
                f"{refused}: it is not declared read-only; give it "
                "annotations=ToolAnnotations(read_only=True), or cache_force=True"
            )
        if tool.requires_approval is not False:
            raise ValueError(
                f"{refused}: it requires approval (a cached result would answer calls the "
                "approver never saw run); cache_force=True to cache it anyway"
            )
    return CachedCalls(check_cache(cache), shared=shared, force=force)


def _awaited(awaitable: Awaitable[T]) -> T:
    # Not a lambda in `execute`: a closure there would cost every call a cell.
    return run_sync(lambda: awaitable)


def _default_name(target: Callable[..., Any]) -> str:
    """The function's name; a partial's wrapped function's; a callable object's class name."""
    while isinstance(target, functools.partial):
        target = target.func
    name = getattr(target, "__name__", None)
    return name if isinstance(name, str) else type(target).__name__


def _defined_in_class_body(function: Any) -> bool:
    """A plain function written in a class body whose first parameter is `self` or `cls`."""
    qualname = getattr(function, "__qualname__", "")
    parts = qualname.split(".")
    if len(parts) < 2 or parts[-2] == "<locals>":
        return False
    try:
        first = next(iter(inspect.signature(function).parameters), None)
    except (TypeError, ValueError):
        return False
    return first in ("self", "cls")


class ToolDecorator(Protocol):
    """What `@tool(...)` returns: a decorator that keeps the function's signature."""

    def __call__(self, function: Callable[P, R], /) -> Tool[P, R]: ...


@overload
def tool(function: Callable[P, R], /) -> Tool[P, R]: ...


@overload
def tool(**options: Unpack[ToolOptions]) -> ToolDecorator: ...


def tool(
    function: Callable[..., Any] | None = None, /, **options: Unpack[ToolOptions]
) -> Tool[Any, Any] | ToolDecorator:
    """Turn a typed function or method into a `Tool`; use bare (`@tool`) or with options
    (`@tool(timeout=5)`, see `ToolOptions`).

    Raises:
        TypeError: A parameter is `*args`/`**kwargs`, unannotated, or of a type that cannot be
            expressed as JSON Schema; the message names the function and the parameter.
        ValueError: The name is not a valid tool name (`^[a-zA-Z0-9_-]{1,64}$`).
    """

    check_options(options, ToolOptions, "@tool")

    def decorate(target: Callable[..., Any], namespace: Mapping[str, Any] | None) -> Tool[Any, Any]:
        return Tool(target, namespace=namespace, **options)

    if function is not None:
        return decorate(function, _caller_namespace())

    def decorator(target: Callable[..., Any], /) -> Tool[Any, Any]:
        return decorate(target, _caller_namespace())

    return cast(ToolDecorator, decorator)


def _caller_namespace() -> Mapping[str, Any] | None:
    """The local names where the decorator is applied, to resolve annotations naming them
    (a function or class body, also under `from __future__ import annotations`)."""
    frame = sys._getframe(2)
    if frame.f_locals is frame.f_globals:
        return None
    return dict(frame.f_locals)
