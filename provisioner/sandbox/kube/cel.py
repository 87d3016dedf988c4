"""The subset of CEL that DRA device selectors use, evaluated over one device as the DRA CEL
environment exposes it.

Source: kubernetes/kubernetes staging/src/k8s.io/dynamic-resource-allocation/cel/compile.go:
- one variable, `device`, an object with `driver` (string), `attributes` (map of domain to map of
  name to any: string, int, bool or semver) and `capacity` (map of domain to map of name to
  quantity); an attribute or capacity name without a domain gets the driver as its domain
  (parseQualifiedName);
- looking up a domain the device has none of gives an empty map (newStringInterfaceMapWithDefault),
  so `device.attributes['other.com'].x` fails with "no such key: x" and `'x' in
  device.attributes['other.com']` is false;
- the SemverLib and the Kubernetes base environment's quantity library, and `cel.bind`;
- the expression must be of type bool (or dyn); a result that is not a bool is a runtime error.
Operators follow the CEL spec (google/cel-spec doc/langdef.md): `&&`/`||` are commutative over
errors (`false && error` is false), `==` across unrelated types is false, ordering across them is
"no such overload".

What this module does not evaluate (arithmetic, macros other than `has` and `cel.bind`, optional
chaining, regular expressions...) raises `Unsupported`, never a guess. Expressions are parsed once.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from provisioner.sandbox.kube.celvalues import INT64_MAX, BadValue, Quantity, Semver

__all__ = ["CelError", "CompileError", "EvaluationError", "Program", "Unsupported", "compile_selector"]


class CelError(Exception):
    """Any error about a CEL expression."""


class CompileError(CelError):
    """What the API server's CEL compiler rejects (it refuses such a selector when stored)."""


class EvaluationError(CelError):
    """A runtime error of the expression against one device (cel-go's message)."""


class Unsupported(CelError):
    """Valid CEL, perhaps, but outside what the sandbox evaluates."""


# Static types: CEL's names, plus the device's own maps (dyn where the checker does not know).
DYN, BOOL, INT, DOUBLE, STRING, NULL, LIST = "dyn", "bool", "int", "double", "string", "null_type", "list"
DEVICE, ATTRIBUTES, CAPACITIES = "kubernetes.DRADevice", "map(string, map(string, dyn))", "capacities"
ATTRIBUTE_MAP, CAPACITY_MAP = "map(string, dyn)", "map(string, kubernetes.Quantity)"
MAPS = (ATTRIBUTES, CAPACITIES, ATTRIBUTE_MAP, CAPACITY_MAP)
NUMERIC = (INT, DOUBLE)
ORDERED = (INT, DOUBLE, STRING, BOOL)
DEVICE_FIELDS = {"driver": STRING, "attributes": ATTRIBUTES, "capacity": CAPACITIES}
SELECTED = {
    ATTRIBUTES: ATTRIBUTE_MAP,
    CAPACITIES: CAPACITY_MAP,
    ATTRIBUTE_MAP: DYN,
    CAPACITY_MAP: Quantity.TYPE,
}


class _DomainMap(dict):  # type: ignore[type-arg]
    """The outer attributes/capacity map: a domain the device lacks reads as an empty map."""

    def __missing__(self, key: str) -> dict[str, Any]:
        return {}


def runtime_type(value: Any) -> str:
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return INT
    if isinstance(value, float):
        return DOUBLE
    if isinstance(value, str):
        return STRING
    if isinstance(value, Semver | Quantity):
        return value.TYPE
    if isinstance(value, list):
        return LIST
    if isinstance(value, dict):
        return "map"
    return NULL if value is None else type(value).__name__


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def equal(a: Any, b: Any) -> bool:
    """CEL's heterogeneous equality: numbers by value, other types never equal one another."""
    if _numeric(a) and _numeric(b):
        return bool(a == b)
    if runtime_type(a) != runtime_type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    return bool(a == b)


def _overload(op: str, *values: Any) -> EvaluationError:
    return EvaluationError(f"no such overload: {op}({', '.join(runtime_type(v) for v in values)})")


# ---------------------------------------------------------------- the tree, each node evaluating itself


Env = Mapping[str, Any]


@dataclass
class Node:
    pos: int
    kind: str  # its static type

    def eval(self, env: Env) -> Any:
        raise NotImplementedError


@dataclass
class Literal(Node):
    value: Any

    def eval(self, env: Env) -> Any:
        return self.value


@dataclass
class Ident(Node):
    name: str

    def eval(self, env: Env) -> Any:
        return env[self.name]


@dataclass
class Select(Node):
    operand: Node
    key: Node  # a string Literal for `.field`, any expression for `[key]`
    presence: bool = False  # has(operand.field)

    def eval(self, env: Env) -> Any:
        container, key = self.operand.eval(env), self.key.eval(env)
        if isinstance(container, list):
            if not isinstance(key, int) or isinstance(key, bool):
                raise _overload("_[_]", container, key)
            if not 0 <= key < len(container):
                raise EvaluationError(f"index out of bounds: {key}")
            return container[key]
        if not isinstance(container, dict):
            raise EvaluationError(f"type '{runtime_type(container)}' does not support field selection")
        if self.presence:
            return key in container
        if key in container or isinstance(container, _DomainMap):
            return container[key]
        raise EvaluationError(f"no such key: {key}")


@dataclass
class Not(Node):
    operand: Node

    def eval(self, env: Env) -> Any:
        value = self.operand.eval(env)
        if not isinstance(value, bool):
            raise _overload("!_", value)
        return not value


@dataclass
class Logic(Node):
    op: str  # "&&" or "||"
    left: Node
    right: Node

    def eval(self, env: Env) -> Any:
        decisive = self.op == "||"  # the value that decides the whole, whichever side gives it
        failure: EvaluationError | None = None
        for side in (self.left, self.right):
            try:
                value = side.eval(env)
            except EvaluationError as error:
                failure = failure or error
                continue
            if not isinstance(value, bool):
                failure = failure or _overload(f"_{self.op}_", value)
            elif value is decisive:
                return decisive
        if failure is not None:
            raise failure
        return not decisive


@dataclass
class Conditional(Node):
    condition: Node
    then: Node
    otherwise: Node

    def eval(self, env: Env) -> Any:
        test = self.condition.eval(env)
        if not isinstance(test, bool):
            raise _overload("_?_:_", test)
        return self.then.eval(env) if test else self.otherwise.eval(env)


_ORDER: dict[str, Callable[[int], bool]] = {
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
}


@dataclass
class Compare(Node):
    op: str
    left: Node
    right: Node

    def eval(self, env: Env) -> Any:
        a, b = self.left.eval(env), self.right.eval(env)
        if self.op == "==":
            return equal(a, b)
        if self.op == "!=":
            return not equal(a, b)
        if self.op == "in":
            if isinstance(b, dict):
                return a in b
            if isinstance(b, list):
                return any(equal(a, item) for item in b)
            raise _overload("@in", a, b)
        comparable = (_numeric(a) and _numeric(b)) or (
            runtime_type(a) == runtime_type(b) and runtime_type(a) in ORDERED
        )
        if not comparable:
            raise _overload(f"_{self.op}_", a, b)
        return _ORDER[self.op]((a > b) - (a < b))


@dataclass
class ListLiteral(Node):
    items: list[Node]

    def eval(self, env: Env) -> Any:
        return [item.eval(env) for item in self.items]


@dataclass
class Bind(Node):
    name: str
    init: Node
    body: Node

    def eval(self, env: Env) -> Any:
        return self.body.eval({**env, self.name: self.init.eval(env)})


@dataclass
class Call(Node):
    name: str
    target: Node | None
    args: list[Node]

    def eval(self, env: Env) -> Any:
        values = [a.eval(env) for a in ([self.target] if self.target else []) + self.args]
        try:
            return _FUNCTIONS[self.name](*values)
        except BadValue as error:
            raise EvaluationError(str(error)) from None


def _semver_compare(a: Any, b: Any) -> int:
    if type(a) is not type(b) or not isinstance(a, Semver | Quantity):
        raise _overload("compareTo", a, b)
    return a.compare(b)  # type: ignore[arg-type]


def _as_integer(q: Any) -> int:
    if not isinstance(q, Quantity):
        raise _overload("asInteger", q)
    if q.value.denominator != 1 or abs(q.value) > INT64_MAX:
        raise EvaluationError("cannot convert value to integer")
    return int(q.value)


def _string_method(name: str) -> Callable[[Any, Any], bool]:
    def method(s: Any, arg: Any) -> bool:
        if not isinstance(s, str) or not isinstance(arg, str):
            raise _overload(name, s, arg)
        return bool(
            getattr(s, {"startsWith": "startswith", "endsWith": "endswith"}.get(name, "__contains__"))(arg)
        )

    return method


def _size(value: Any) -> int:
    if not isinstance(value, str | list | dict):
        raise _overload("size", value)
    return len(value)


def _of(kind: type, name: str, make: Callable[[Any], Any]) -> Callable[..., Any]:
    def function(*values: Any) -> Any:
        if not all(isinstance(v, kind) for v in values) or any(isinstance(v, bool) for v in values):
            raise _overload(name, *values)
        return make(*values)

    return function


def _parses(parse: Callable[[str], Any]) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        try:
            parse(text)
        except BadValue:
            return False
        return True

    return check


# name -> (implementation, result type); a method's receiver is its first argument.
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "semver": _of(str, "semver", Semver.parse),
    "isSemver": _of(str, "isSemver", _parses(Semver.parse)),
    "quantity": _of(str, "quantity", Quantity.parse),
    "isQuantity": _of(str, "isQuantity", _parses(Quantity.parse)),
    "compareTo": _semver_compare,
    "isGreaterThan": lambda a, b: _semver_compare(a, b) > 0,
    "isLessThan": lambda a, b: _semver_compare(a, b) < 0,
    "major": _of(Semver, "major", lambda v: v.major),
    "minor": _of(Semver, "minor", lambda v: v.minor),
    "patch": _of(Semver, "patch", lambda v: v.patch),
    "asInteger": _as_integer,
    "isInteger": _of(Quantity, "isInteger", lambda q: q.value.denominator == 1 and abs(q.value) <= INT64_MAX),
    "sign": _of(Quantity, "sign", lambda q: (q.value > 0) - (q.value < 0)),
    "startsWith": _string_method("startsWith"),
    "endsWith": _string_method("endsWith"),
    "contains": _string_method("contains"),
    "size": _size,
}
_RESULTS = {
    "semver": Semver.TYPE,
    "quantity": Quantity.TYPE,
    "compareTo": INT,
    "major": INT,
    "minor": INT,
    "patch": INT,
    "asInteger": INT,
    "sign": INT,
    "size": INT,
}
_GLOBAL = ("semver", "isSemver", "quantity", "isQuantity", "size")


# ---------------------------------------------------------------- the parser (CEL's grammar, langdef.md)

_TOKEN = re.compile(
    r"""(?P<space>\s+|//[^\n]*)
    |(?P<number>0[xX][0-9a-fA-F]+[uU]?|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[uU]?)
    |(?P<string>[rRbB]{0,2}(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))
    |(?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<op>==|!=|<=|>=|&&|\|\||[<>!()\[\]{}.,?:+\-*/%])""",
    re.VERBOSE | re.DOTALL,
)
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_ESCAPE = re.compile(
    r"\\(?:([abfnrtv\\'\"`?])|x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|([0-3][0-7]{2}))"
)
RESERVED = {"as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop"}
RESERVED |= {"package", "namespace", "return", "var", "void", "while"}


@dataclass
class Token:
    kind: str  # number, string, ident, op, end
    text: str
    pos: int


def _tokens(expression: str) -> list[Token]:
    tokens, pos = [], 0
    while pos < len(expression):
        match = _TOKEN.match(expression, pos)
        if not match:
            raise _syntax(pos, f"token recognition error at: '{expression[pos]}'")
        if match.lastgroup != "space":
            tokens.append(Token(match.lastgroup or "", match.group(), pos))
        pos = match.end()
    tokens.append(Token("end", "", len(expression)))
    return tokens


def _syntax(pos: int, message: str) -> CompileError:
    return CompileError(f"compilation failed: ERROR: <input>:1:{pos + 1}: Syntax error: {message}")


def _checked(pos: int, message: str) -> CompileError:
    return CompileError(f"compilation failed: ERROR: <input>:1:{pos + 1}: {message}")


class _Parser:
    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.tokens = _tokens(expression)
        self.at = 0
        self.scope: dict[str, str] = {"device": DEVICE}

    # ------------------------------------------------------------ helpers

    @property
    def token(self) -> Token:
        return self.tokens[self.at]

    def take(self, text: str | None = None) -> Token:
        token = self.token
        if text is not None and token.text != text:
            shown = token.text or "<EOF>"
            raise _syntax(token.pos, f"mismatched input '{shown}' expecting '{text}'")
        self.at += 1
        return token

    def accept(self, *texts: str) -> Token | None:
        if self.token.kind == "op" and self.token.text in texts:
            return self.take()
        return None

    def unsupported(self, what: str, pos: int) -> Unsupported:
        return Unsupported(
            f"the sandbox does not evaluate {what} (column {pos + 1} of the CEL expression "
            f"{self.expression!r}); it evaluates comparisons, &&, ||, !, ?:, in, has(), cel.bind() "
            "and the semver and quantity functions over device.driver, device.attributes and device.capacity"
        )

    # ------------------------------------------------------------ grammar

    def parse(self) -> Node:
        node = self.expr()
        if self.token.kind != "end":
            raise _syntax(self.token.pos, f"extraneous input '{self.token.text}' expecting <EOF>")
        if node.kind not in (BOOL, DYN):
            raise CompileError(f"must evaluate to bool or the unknown type, not {node.kind}")
        return node

    def expr(self) -> Node:
        node = self.logic("||", self.conjunction)
        question = self.accept("?")
        if not question:
            return node
        then = self.logic("||", self.conjunction)
        self.take(":")
        otherwise = self.expr()
        self._expect_bool("_?_:_", node)
        kind = then.kind if then.kind == otherwise.kind else DYN
        return Conditional(question.pos, kind, node, then, otherwise)

    def conjunction(self) -> Node:
        return self.logic("&&", self.relation)

    def logic(self, op: str, operand: Callable[[], Node]) -> Node:
        node = operand()
        while token := self.accept(op):
            right = operand()
            self._expect_bool(f"_{op}_", node, right)
            node = Logic(token.pos, BOOL, op, node, right)
        return node

    def _expect_bool(self, op: str, *nodes: Node) -> None:
        if any(n.kind not in (BOOL, DYN) for n in nodes):
            kinds = ", ".join(n.kind for n in nodes)
            raise _checked(nodes[0].pos, f"found no matching overload for '{op}' applied to '({kinds})'")

    def relation(self) -> Node:
        node = self.arithmetic()
        while True:
            token = self.token
            relational = token.kind == "op" and token.text in ("==", "!=", "<", "<=", ">", ">=")
            if relational or (token.kind == "ident" and token.text == "in"):
                op = self.take().text
            else:
                return node
            right = self.arithmetic()
            self._check_relation(token.pos, op, node, right)
            node = Compare(token.pos, BOOL, op, node, right)

    def _check_relation(self, pos: int, op: str, left: Node, right: Node) -> None:
        name = "@in" if op == "in" else f"_{op}_"
        a, b = left.kind, right.kind
        if op == "in":
            fits = b in (DYN, LIST, *MAPS)
        elif op in ("==", "!="):
            fits = DYN in (a, b) or a == b or (a in NUMERIC and b in NUMERIC)
        else:
            known = [k for k in (a, b) if k != DYN]
            fits = all(k in ORDERED for k in known) and (
                len(known) < 2 or a == b or (a in NUMERIC and b in NUMERIC)
            )
        if not fits:
            raise _checked(pos, f"found no matching overload for '{name}' applied to '({a}, {b})'")

    def arithmetic(self) -> Node:
        node = self.unary()
        if self.token.kind == "op" and self.token.text in ("+", "-", "*", "/", "%"):
            raise self.unsupported(f"arithmetic ('{self.token.text}')", self.token.pos)
        return node

    def unary(self) -> Node:
        if token := self.accept("!"):
            operand = self.unary()
            self._expect_bool("!_", operand)
            return Not(token.pos, BOOL, operand)
        if token := self.accept("-"):
            operand = self.unary()
            if isinstance(operand, Literal) and operand.kind in NUMERIC:
                return Literal(token.pos, operand.kind, -operand.value)
            raise self.unsupported("negation of an expression", token.pos)
        return self.member()

    def member(self) -> Node:
        node = self.primary()
        while True:
            if self.token.text in (".", "[") and self.tokens[self.at + 1].text == "?":
                raise self.unsupported("optional field selection ('.?' / '[?')", self.token.pos)
            if token := self.accept("."):
                name = self.take()
                if name.kind != "ident":
                    raise _syntax(name.pos, f"mismatched input '{name.text}' expecting IDENTIFIER")
                if self.accept("("):
                    self.known_function(name)
                    node = self.call(name, node, self.arguments())
                else:
                    node = self.select(token.pos, node, Literal(name.pos, STRING, name.text))
            elif token := self.accept("["):
                key = self.expr()
                self.take("]")
                node = self.select(token.pos, node, key)
            else:
                return node

    def select(self, pos: int, operand: Node, key: Node, presence: bool = False) -> Node:
        field = key.value if isinstance(key, Literal) else None
        if operand.kind == DEVICE:
            if field not in DEVICE_FIELDS:
                raise _checked(pos, f"undefined field '{field}'")
            return Select(pos, DEVICE_FIELDS[str(field)], operand, key, presence)
        if operand.kind == LIST:
            return Select(pos, DYN, operand, key, presence)
        if operand.kind not in (DYN, *MAPS):
            raise _checked(pos, f"type '{operand.kind}' does not support field selection")
        if key.kind not in (STRING, DYN):
            raise _checked(
                pos, f"found no matching overload for '_[_]' applied to '({operand.kind}, {key.kind})'"
            )
        return Select(pos, BOOL if presence else SELECTED.get(operand.kind, DYN), operand, key, presence)

    def arguments(self) -> list[Node]:
        args: list[Node] = []
        if self.accept(")"):
            return args
        while True:
            args.append(self.expr())
            if self.accept(")"):
                return args
            self.take(",")

    def call(self, name: Token, target: Node | None, args: list[Node]) -> Node:
        if target is None and name.text == "has":
            return self.presence(name, args)
        if isinstance(target, Ident) and target.name == "cel" and name.text == "bind":
            raise _checked(name.pos, "cel.bind() takes a name, a value and an expression")
        if (target is None) != (name.text in _GLOBAL) and name.text != "size":
            how = "as a method" if target is not None else "as a global function"
            raise _checked(name.pos, f"undeclared reference to '{name.text}' ({how})")
        kind = _RESULTS.get(name.text, BOOL)
        return Call(name.pos, kind, name.text, target, args)

    def known_function(self, name: Token) -> None:
        """Before its arguments are parsed: a macro such as exists() declares its own variables."""
        if name.text not in _FUNCTIONS:
            raise self.unsupported(f"the function '{name.text}'", name.pos)

    def presence(self, name: Token, args: list[Node]) -> Node:
        if len(args) != 1 or not isinstance(args[0], Select) or not isinstance(args[0].key, Literal):
            raise _checked(name.pos, "invalid argument to has() macro")
        select = args[0]
        return self.select(select.pos, select.operand, select.key, presence=True)

    def primary(self) -> Node:
        token = self.token
        if token.kind == "number":
            return self.number(self.take())
        if token.kind == "string":
            return Literal(token.pos, STRING, self.string(self.take()))
        if token.kind == "ident":
            return self.identifier(self.take())
        if self.accept("("):
            node = self.expr()
            self.take(")")
            return node
        if self.accept("["):
            items = [] if self.accept("]") else self.items("]")
            return ListLiteral(token.pos, LIST, items)
        if token.text == "{":
            raise self.unsupported("map literals", token.pos)
        if token.text == ".":
            raise self.unsupported("qualified names with a leading '.'", token.pos)
        shown = token.text or "<EOF>"
        raise _syntax(token.pos, f"mismatched input '{shown}' expecting an expression")

    def items(self, closing: str) -> list[Node]:
        items = [self.expr()]
        while self.accept(","):
            if self.accept(closing):
                return items
            items.append(self.expr())
        self.take(closing)
        return items

    def identifier(self, token: Token) -> Node:
        name = token.text
        if name in ("true", "false"):
            return Literal(token.pos, BOOL, name == "true")
        if name == "null":
            return Literal(token.pos, NULL, None)
        if name in RESERVED or name == "in":
            raise _syntax(token.pos, f"reserved identifier: {name}")
        if self.accept("("):
            if name != "has":
                self.known_function(token)
            return self.call(token, None, self.arguments())
        if name == "cel" and self.token.text == "." and self.tokens[self.at + 1].text == "bind":
            return self.bind(token)
        if name not in self.scope:
            raise _checked(token.pos, f"undeclared reference to '{name}' (in container '')")
        return Ident(token.pos, self.scope[name], name)

    def bind(self, token: Token) -> Node:
        """cel.bind(name, init, body) (cel-go ext.Bindings): `name` is `init` within `body`."""
        self.take(".")
        self.take("bind")
        self.take("(")
        name = self.take()
        if name.kind != "ident":
            raise _checked(name.pos, "cel.bind() variable names must be simple identifiers")
        self.take(",")
        init = self.expr()
        self.take(",")
        outer = self.scope
        self.scope = {**outer, name.text: init.kind}
        body = self.expr()
        self.scope = outer
        self.take(")")
        return Bind(token.pos, body.kind, name.text, init, body)

    def number(self, token: Token) -> Literal:
        text = token.text
        if text[-1] in "uU":
            raise self.unsupported("unsigned integer literals", token.pos)
        if text[:2] in ("0x", "0X"):
            return Literal(token.pos, INT, int(text, 16))
        if any(c in text for c in ".eE"):
            return Literal(token.pos, DOUBLE, float(text))
        return Literal(token.pos, INT, int(text))

    def string(self, token: Token) -> str:
        text = token.text
        prefix = len(text) - len(text.lstrip("rRbB"))
        if "b" in text[:prefix].lower():
            raise self.unsupported("bytes literals", token.pos)
        body = text[prefix:]
        quote = 3 if body[:3] in ("'''", '"""') else 1
        body = body[quote:-quote]
        if "r" in text[:prefix].lower():
            return body
        return _ESCAPE.sub(_unescape, body)


def _unescape(match: re.Match[str]) -> str:
    simple, hex2, hex4, hex8, octal = match.groups()
    if simple:
        return _ESCAPES.get(simple, simple)
    digits = hex2 or hex4 or hex8
    return chr(int(digits, 16)) if digits else chr(int(octal, 8))


# ---------------------------------------------------------------- the entry points


@dataclass(frozen=True)
class Program:
    """A parsed selector; `matches` evaluates it against one device."""

    expression: str
    root: Node

    def matches(self, driver: str, device: Mapping[str, Any]) -> bool:
        """`device` as a ResourceSlice (resource.k8s.io/v1) lists it: attributes as
        {name: {string|int|bool|version: value}}, capacity as {name: {value: quantity}}."""
        try:
            env = {"device": device_variable(driver, device)}
        except BadValue as error:
            raise EvaluationError(str(error)) from None
        result = self.root.eval(env)
        if not isinstance(result, bool):
            raise EvaluationError(f"CEL result of type {runtime_type(result)} could not be converted to bool")
        return result


def compile_selector(expression: str) -> Program:
    """Parse and check `expression` (CompileError, Unsupported), once per distinct text."""
    if not isinstance(expression, str) or not expression.strip():
        raise CompileError("compilation failed: ERROR: <input>:1:1: Syntax error: the expression is empty")
    compiled = _compiled(expression)
    if isinstance(compiled, CelError):
        raise compiled
    return compiled


@functools.lru_cache(maxsize=1024)
def _compiled(expression: str) -> Program | CelError:
    """The program, or the error, cached alike: a bad selector is not parsed again per device."""
    try:
        return Program(expression, _Parser(expression).parse())
    except CelError as error:
        return error


def device_variable(driver: str, device: Mapping[str, Any]) -> dict[str, Any]:
    """The `device` variable: attributes and capacities grouped by domain (getAttributeValue: an
    attribute holds exactly one of int, bool, string, version)."""
    attributes: _DomainMap = _DomainMap()
    for name, attribute in (device.get("attributes") or {}).items():
        domain, ident = _qualified(str(name), driver)
        attributes.setdefault(domain, {})[ident] = _attribute_value(str(name), attribute)
    capacity: _DomainMap = _DomainMap()
    for name, entry in (device.get("capacity") or {}).items():
        domain, ident = _qualified(str(name), driver)
        capacity.setdefault(domain, {})[ident] = Quantity.parse(str((entry or {}).get("value", "")))
    return {"driver": driver, "attributes": attributes, "capacity": capacity}


def _qualified(name: str, driver: str) -> tuple[str, str]:
    domain, slash, ident = name.partition("/")  # parseQualifiedName splits at the first "/"
    return (domain, ident) if slash else (driver, name)


def _attribute_value(name: str, attribute: Any) -> Any:
    if isinstance(attribute, Mapping):
        if "int" in attribute:
            return int(attribute["int"])
        if "bool" in attribute:
            return bool(attribute["bool"])
        if "string" in attribute:
            return str(attribute["string"])
        if "version" in attribute:
            return Semver.parse(str(attribute["version"]))
    raise BadValue(f"attribute {name}: unsupported attribute value")
