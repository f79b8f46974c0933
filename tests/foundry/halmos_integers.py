"""The first step of halmos's solver (``halmos_solver.py``): a query over 256-bit words restated over the integers,
each word term as its signed value, and given to z3's linear integer arithmetic.

cvc5's integer encoding of bit-vectors proves the split Shapley check's queries, but in 0.1 to 4 s each, as it
restates every sum modulo 2^256; Bitwuzla's bit-blasting does not finish their products and quotients. Most of those
sums cannot wrap: the check's inputs are bounded (``-2^120 <= g <= 2^120``), so an interval computed bottom-up bounds
every term, and where a sum's interval lies within the word's range its signed value is the integer sum. What is
left is linear once each product and quotient of two unknowns is a fresh integer bounded by its interval, and z3
refutes it in tens of milliseconds. Each term ``t`` of ``n`` bits becomes an integer expression ``S(t)`` for its signed
value and an interval ``[lo, hi]`` holding it in every model of the query:

- a constant is its signed value; a variable is an integer within ``[-2^(n-1), 2^(n-1))``, narrowed by the query's
  top-level bounds (``c <= x``, ``x <= c`` as assertions, which every model meets);
- a sum, difference, negation or product by a constant is the integer result ``r``; where ``r``'s interval is not
  within the word's range, ``S = r - k * 2^n`` with a fresh integer ``k`` and ``S`` in range (wrapping, exactly);
  the low ``m`` bits of a term are the same with ``2^m``; ``t`` followed by ``k`` zero bits is ``S(t) * 2^k``;
- a product of two non-constant terms, where the product of their intervals is within the range (so it does not
  wrap), is a fresh integer in that interval, not negative when both factors are the same term (up to the order of
  a sum's operands); a quotient of such a product by one of its factors is the other factor where the divisor is not
  0 (exact division);
- a quotient by a constant ``c >= 2`` is a fresh ``q`` with truncated division's facts (``0 <= x - c * q < c`` for
  ``x >= 0``, ``-c < x - c * q <= 0`` below); by a non-constant ``d``, a fresh ``q`` with ``|q| <= |x|`` and its sign
  and bound by ``d``'s sign (``x >= 0, d >= 1 => 0 <= q <= x``, and so on), and SMT-LIB's ``bvsdiv(x, 0)`` (-1 for
  ``x >= 0``, else 1); halmos's uninterpreted ``f_evm_bvmul`` and ``f_evm_bvsdiv`` (its first, abstracted queries)
  are read as halmos defines them when it refines a query (the product; the quotient, 0 for a divisor of 0);
- anything else is a fresh integer in the word's range, and a condition on anything not a word (halmos's balance
  arrays) a fresh Boolean.

Sound for ``unsat``: every model of the query gives one of the integer query (each variable its signed value, each
fresh integer the value of the term it stands for, each fresh Boolean the condition's truth), since each fact added
holds of those values by the definitions of SMT-LIB's operations and integer arithmetic. On an abstracted query, an
``unsat`` is that of the query halmos would refine it to, which is what the check is about. The square's no-wrap
is the interval arithmetic above (``|t| <= 2^121`` squares to at most ``2^242``), the squaring lemma's statement,
which halmos proves on its own (``check_squareLemma``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from halmos_solver import canonical

if TYPE_CHECKING:
    import z3

LIA_MS = 5000
"""z3 on the integer query: tens of milliseconds on the split Shapley check's queries."""

Term = tuple["z3.ArithRef", int, int]
"""An integer expression for a word's signed value and an interval holding it."""


class _Restated:
    """The integer query of one bit-vector query (``restated``)."""

    def __init__(self, assertions: list[z3.BoolRef]) -> None:
        import z3

        self.z3 = z3
        self.facts: list[z3.BoolRef] = []
        self.bounds: dict[str, tuple[int, int]] = {}
        self.terms: dict[int, Term] = {}
        self.shared: dict[str, tuple[Term, int]] = {}
        self.products: dict[int, tuple[z3.ExprRef, z3.ExprRef]] = {}
        self.bools: dict[int, z3.BoolRef] = {}
        self.keys: dict[int, str] = {}
        self.count = 0
        for a in assertions:
            for c in self.conjuncts(a):
                self.bound(c)

    def conjuncts(self, a: z3.BoolRef) -> Iterator[z3.BoolRef]:
        if self.z3.is_and(a):
            for c in a.children():
                yield from self.conjuncts(c)
        else:
            yield a

    def variable(self, e: z3.ExprRef) -> bool:
        z3 = self.z3
        return z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED

    def bound(self, c: z3.BoolRef) -> None:
        """A top-level ``k <= x`` or ``x <= k`` (signed): a bound on ``x`` in every model."""
        z3 = self.z3
        if not z3.is_app_of(c, z3.Z3_OP_SLEQ):
            return
        x, y = c.children()
        if self.variable(y) and z3.is_bv_value(x):
            lo, hi = self.bounds.get(y.decl().name(), full(y.size()))
            self.bounds[y.decl().name()] = (max(lo, x.as_signed_long()), hi)
        elif self.variable(x) and z3.is_bv_value(y):
            lo, hi = self.bounds.get(x.decl().name(), full(x.size()))
            self.bounds[x.decl().name()] = (lo, min(hi, y.as_signed_long()))

    def fresh(self, lo: int, hi: int, name: str) -> z3.ArithRef:
        self.count += 1
        v = self.z3.Int(f"{name}!{self.count}")
        self.facts.append(self.z3.And(v >= lo, v <= hi))
        return v

    def opaque(self, n: int) -> Term:
        lo, hi = full(n)
        return (self.fresh(lo, hi, "word"), lo, hi)

    def wrap(self, r: z3.ArithRef, lo: int, hi: int, n: int) -> Term:
        """``r`` as an ``n``-bit signed value: ``r`` itself where its interval is in range, else ``r - k * 2^n``."""
        if full(n)[0] <= lo and hi <= full(n)[1]:
            return (r, lo, hi)
        size, half = 1 << n, 1 << (n - 1)
        k = self.fresh((lo + half) // size, (hi + half) // size, "wraps")
        s = r - k * size
        self.facts.append(self.z3.And(s >= -half, s <= half - 1))
        return (s, -half, half - 1)

    def key(self, e: z3.ExprRef) -> str:
        return canonical(e, self.keys)

    def evm(self, e: z3.ExprRef) -> str | None:
        """``mul`` or ``div`` for halmos's abstracted product or signed quotient."""
        z3 = self.z3
        if e.decl().kind() != z3.Z3_OP_UNINTERPRETED or e.num_args() != 2:
            return None
        name = e.decl().name()
        return "mul" if name.startswith("f_evm_bvmul_") else "div" if name.startswith("f_evm_bvsdiv_") else None

    def term(self, e: z3.ExprRef) -> Term:
        z3 = self.z3
        if e.get_id() in self.terms:
            return self.terms[e.get_id()]
        shared = z3.is_app(e) and (
            e.decl().kind() in (z3.Z3_OP_BMUL, z3.Z3_OP_BSDIV, z3.Z3_OP_BSDIV_I) or self.evm(e) is not None
        )
        key = self.key(e) if shared else ""
        if shared and key in self.shared:
            found, first = self.shared[key]
            if first in self.products:
                self.products[e.get_id()] = self.products[first]
        else:
            found = self.restate(e)
            if shared:
                self.shared[key] = (found, e.get_id())
        self.terms[e.get_id()] = found
        return found

    def restate(self, e: z3.ExprRef) -> Term:
        z3 = self.z3
        n = e.size()
        if z3.is_bv_value(e):
            v = e.as_signed_long()
            return (z3.IntVal(v), v, v)
        if self.variable(e):
            lo, hi = self.bounds.get(e.decl().name(), full(n))
            x = z3.Int(e.decl().name())
            self.facts.append(z3.And(x >= lo, x <= hi))
            return (x, lo, hi)
        kind = e.decl().kind()
        if kind == z3.Z3_OP_BADD:
            parts = [self.term(c) for c in e.children()]
            return self.wrap(z3.Sum([p[0] for p in parts]), sum(p[1] for p in parts), sum(p[2] for p in parts), n)
        if kind == z3.Z3_OP_BSUB and e.num_args() == 2:
            x, y = self.term(e.arg(0)), self.term(e.arg(1))
            return self.wrap(x[0] - y[0], x[1] - y[2], x[2] - y[1], n)
        if kind == z3.Z3_OP_BNEG:
            x = self.term(e.arg(0))
            return self.wrap(-x[0], -x[2], -x[1], n)
        if (kind == z3.Z3_OP_BMUL or self.evm(e) == "mul") and e.num_args() == 2:
            return self.product(e, n)
        if kind in (z3.Z3_OP_BSDIV, z3.Z3_OP_BSDIV_I):
            return self.quotient(e.arg(0), e.arg(1), n)
        if self.evm(e) == "div":
            q, d = self.quotient(e.arg(0), e.arg(1), n), self.term(e.arg(1))
            return (z3.If(d[0] == 0, 0, q[0]), min(q[1], 0), max(q[2], 0))
        if kind == z3.Z3_OP_ITE:
            a, b = self.term(e.arg(1)), self.term(e.arg(2))
            return (z3.If(self.boolean(e.arg(0)), a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]))
        if kind == z3.Z3_OP_CONCAT and e.num_args() == 2 and z3.is_bv_value(e.arg(1)) and e.arg(1).as_long() == 0:
            shift, y = e.arg(1).size(), self.term(e.arg(0))
            return (y[0] * (1 << shift), y[1] << shift, y[2] << shift)
        if kind == z3.Z3_OP_EXTRACT and e.params()[1] == 0:
            x = self.term(e.arg(0))
            return self.wrap(x[0], x[1], x[2], n)
        return self.opaque(n)

    def product(self, e: z3.ExprRef, n: int) -> Term:
        z3 = self.z3
        x, y = e.arg(0), e.arg(1)
        for c, other in ((x, y), (y, x)):
            if z3.is_bv_value(c):
                k, (t, lo, hi) = c.as_signed_long(), self.term(other)
                return self.wrap(k * t, min(k * lo, k * hi), max(k * lo, k * hi), n)
        a, b = self.term(x), self.term(y)
        ends = [p * q for p in a[1:] for q in b[1:]]
        lo, hi = min(ends), max(ends)
        if not (full(n)[0] <= lo and hi <= full(n)[1]):
            return self.opaque(n)
        square = self.key(x) == self.key(y)
        if square:
            lo = max(lo, 0)
        v = self.fresh(lo, hi, "product")
        if square:
            self.facts.append(z3.Implies(a[0] == 0, v == 0))
        self.products[e.get_id()] = (x, y)
        return (v, lo, hi)

    def quotient(self, x: z3.ExprRef, d: z3.ExprRef, n: int) -> Term:
        z3 = self.z3
        t = self.term(x)
        by_zero = z3.If(t[0] >= 0, -1, 1)
        if z3.is_bv_value(d) and d.as_signed_long() >= 0:
            c = d.as_signed_long()
            if c == 0:
                return (by_zero, -1, 1)
            lo, hi = truncated(t[1], c), truncated(t[2], c)
            q = self.fresh(lo, hi, "quotient")
            r = t[0] - c * q
            self.facts += [
                z3.Implies(t[0] >= 0, z3.And(r >= 0, r <= c - 1)),
                z3.Implies(t[0] < 0, z3.And(r <= 0, r >= 1 - c)),
            ]
            return (q, lo, hi)
        if t[1] == full(n)[0]:
            return self.opaque(n)
        s = self.term(d)
        if x.get_id() in self.products:
            a, b = self.products[x.get_id()]
            other = b if self.key(a) == self.key(d) else a if self.key(b) == self.key(d) else None
            if other is not None:
                o = self.term(other)
                return (z3.If(s[0] == 0, by_zero, o[0]), min(o[1], -1), max(o[2], 1))
        m = max(abs(t[1]), abs(t[2]), 1)
        q = self.fresh(-m, m, "quotient")
        self.facts += [
            z3.Implies(s[0] == 0, q == by_zero),
            z3.Implies(z3.And(s[0] >= 1, t[0] >= 0), z3.And(q >= 0, q <= t[0])),
            z3.Implies(z3.And(s[0] >= 1, t[0] <= 0), z3.And(q <= 0, q >= t[0])),
            z3.Implies(z3.And(s[0] <= -1, t[0] >= 0), z3.And(q <= 0, q >= -t[0])),
            z3.Implies(z3.And(s[0] <= -1, t[0] <= 0), z3.And(q >= 0, q <= -t[0])),
        ]
        return (q, -m, m)

    def unsigned(self, e: z3.ExprRef) -> z3.ArithRef:
        t = self.term(e)
        return t[0] if t[1] >= 0 else self.z3.If(t[0] >= 0, t[0], t[0] + (1 << e.size()))

    def boolean(self, e: z3.ExprRef) -> z3.BoolRef:
        if e.get_id() not in self.bools:
            self.bools[e.get_id()] = self.condition(e)
        return self.bools[e.get_id()]

    def condition(self, e: z3.ExprRef) -> z3.BoolRef:
        z3 = self.z3
        if z3.is_true(e) or z3.is_false(e):
            return z3.BoolVal(z3.is_true(e))
        kind, args = e.decl().kind(), e.children()
        if kind == z3.Z3_OP_NOT:
            return z3.Not(self.boolean(args[0]))
        if kind in (z3.Z3_OP_AND, z3.Z3_OP_OR):
            parts = [self.boolean(c) for c in args]
            return z3.And(parts) if kind == z3.Z3_OP_AND else z3.Or(parts)
        if kind == z3.Z3_OP_IMPLIES:
            return z3.Implies(self.boolean(args[0]), self.boolean(args[1]))
        if kind == z3.Z3_OP_XOR:
            return z3.Xor(self.boolean(args[0]), self.boolean(args[1]))
        if kind == z3.Z3_OP_ITE:
            return z3.If(self.boolean(args[0]), self.boolean(args[1]), self.boolean(args[2]))
        if kind == z3.Z3_OP_EQ and z3.is_bool(args[0]):
            return self.boolean(args[0]) == self.boolean(args[1])
        if kind == z3.Z3_OP_EQ and z3.is_bv(args[0]):
            return self.term(args[0])[0] == self.term(args[1])[0]
        if kind in SIGNED:
            return compare(SIGNED[kind], self.term(args[0])[0], self.term(args[1])[0])
        if kind in UNSIGNED:
            return compare(UNSIGNED[kind], self.unsigned(args[0]), self.unsigned(args[1]))
        if kind == z3.Z3_OP_UNINTERPRETED and not args:
            return z3.Bool(e.decl().name())
        self.count += 1
        return z3.Bool(f"condition!{self.count}")


def full(n: int) -> tuple[int, int]:
    """An ``n``-bit word's signed range."""
    return -(1 << (n - 1)), (1 << (n - 1)) - 1


def truncated(x: int, c: int) -> int:
    """``x / c`` rounded toward zero (``c > 0``), as ``bvsdiv``."""
    return -(-x // c) if x < 0 else x // c


def _kinds() -> tuple[dict[int, str], dict[int, str]]:
    import z3

    return (
        {z3.Z3_OP_SLEQ: "<=", z3.Z3_OP_SLT: "<", z3.Z3_OP_SGEQ: ">=", z3.Z3_OP_SGT: ">"},
        {z3.Z3_OP_ULEQ: "<=", z3.Z3_OP_ULT: "<", z3.Z3_OP_UGEQ: ">=", z3.Z3_OP_UGT: ">"},
    )


SIGNED, UNSIGNED = _kinds()


def compare(op: str, a: z3.ArithRef, b: z3.ArithRef) -> z3.BoolRef:
    return {"<=": a <= b, "<": a < b, ">=": a >= b, ">": a > b}[op]


def restated(assertions: list[z3.BoolRef]) -> list[z3.BoolRef]:
    """The integer query: each assertion restated, then the facts of its fresh integers."""
    query = _Restated(assertions)
    out = [query.boolean(a) for a in assertions]
    return out + query.facts


def refuted(assertions: list[z3.BoolRef]) -> bool:
    """Whether z3 shows the integer query unsatisfiable (False where the query is too deep to restate)."""
    import z3

    solver = z3.Solver()
    solver.set("timeout", LIA_MS)
    try:
        solver.add(*restated(assertions))
    except RecursionError:
        return False
    return solver.check() == z3.unsat
