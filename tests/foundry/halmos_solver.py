"""halmos's solver: ``python halmos_solver.py [--without-squares] QUERY.smt2`` prints ``sat`` and a model, ``unsat``
or ``unknown``.

halmos (``make symbolic``) writes each query as an SMT-LIB file and runs its solver command on it. The checks' queries
are about Solidity's checked multiplication, whose overflow test divides the 256-bit product by a symbolic factor
(``sdiv(x * y, x) == y``): bit-blasting solvers (Bitwuzla, yices, z3) do not prove even ``x * x / x == x`` for a
32-bit ``x`` within a minute, while cvc5's integer encoding of bit-vectors (``solve-bv-as-int``) proves it in
milliseconds, provided the squared term has a sign it can see and the query holds little else. So each query goes
through these steps, the first definite answer winning:

0. the query restated over the integers where interval bounds show its sums do not wrap, its products and quotients
   of two unknowns fresh integers within their intervals, and given to z3's linear integer arithmetic
   (``halmos_integers.py``, which argues its soundness): tens of milliseconds for a query of the split Shapley check,
   abstracted or refined, where the steps below take 0.1 to 4 s;
1. Bitwuzla for 0.3 s: halmos's first, abstracted queries (products and quotients uninterpreted) are mostly
   satisfiable or refuted at once, and Bitwuzla gives the model halmos needs to refine them; a refined query that
   Bitwuzla proves within a second, cvc5's first slice (step 3) proves in as little time, so a longer first look
   only delays the others;
2. where the query squares a term (``t * t``), the squaring lemma (``squares_bounded``): each square a fresh ``v`` and
   each overflow test's ``sdiv(t * t, t)`` a fresh ``q``, with ``v``'s range and ``q = t`` as facts guarded by
   ``|t| <= 2^121``, a linear condition on the inputs' ranges (Bitwuzla for 3 s); then that query with its quotients
   by constants as fresh variables bound by truncated division's facts and its other products and quotients of two
   non-constant terms replaced by fresh variables, all linear, in step 3's slices with cvc5's integer encoding (the
   split Shapley values' efficiency over the coalitions' utilities, divided by ``M!``). Where nothing is squared, the
   query with every product and quotient of two non-constant terms replaced by a fresh variable (Bitwuzla): what
   follows from the linear part alone;
3. slices of the query, smallest first: the assertions over the variables of the last one (the violated property or
   panic), then those sharing a variable with them, and so on up to the whole query; each with cvc5's integer
   encoding, then with every right shift by a constant made opaque (a fresh variable whose top bits are zero, one
   per shifted term up to the order of a sum's operands: the payout's shifted shares, about which the check's
   lemmas state what the property needs), then split into sign cases: every sum that is a factor of a product is
   replaced by a fresh ``n`` (with ``n >= 0``) or ``-n`` (with ``n > 0``) and the equation that defines it;
4. Bitwuzla on the whole query, until halmos's assertion timeout ends it.

Each step is sound for ``unsat``: a slice holds a subset of the assertions, a replaced term only drops what was known
about it (an opaque shift keeps only what holds of every shift: its top bits are zero, and equal terms are equal; a
square keeps what the squaring lemma says of every square in its range, the lemma being proven by halmos as
``check_squareLemma``, a check this solver runs on without the lemma, ``--without-squares``; a quotient by a
constant keeps what SMT-LIB's definition of ``bvsdiv`` says of it), and the sign cases cover every value.
Step 0's integer query is a relaxation of the query in the same sense (``halmos_integers.py``); it bounds squares as
the squaring lemma does, so ``--without-squares`` skips it as well as step 2's lemma. Only the whole
query's answer (steps 1 and 4) is printed as ``sat``.
The script hands each query to a long-lived server (``halmos_server.py``) that has the solvers imported and answers
it in a forked child with ``main``; z3 is imported by the functions that use it, not by the module, as each Bitwuzla
process a query starts would otherwise pay 0.1 s for it.
The solvers come from PyPI as Python bindings (``bitwuzla``, ``cvc5``; z3 comes with halmos); halmos would otherwise
download a solver binary.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Set
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import z3

QUICK_MS = 300
"""Bitwuzla's first look (step 1)."""
SPAWN_S = 0.25
"""A Bitwuzla process's start and parse, beyond its time limit (``bitwuzla``)."""
SLICE_MS = 3000
"""cvc5 on a slice as it is (step 3)."""
CASE_MS = 10000
"""cvc5 on a slice with its shifts opaque, and on each of its sign cases (step 3)."""
SQUARED_MS = 3000
"""Bitwuzla on the query with the squaring lemma applied (step 2): 0.1 to 0.5 s alone, more on a loaded machine."""
MAX_SUMS = 4
"""Sums split into sign cases at most (2^4 cases)."""
SQUARE_BITS = 121
"""The squaring lemma's range: ``|t| <= 2^121`` squares to at most ``2^242`` (``check_squareLemma``)."""


@cache
def nonlinear_kinds() -> frozenset[int]:
    """The kinds of a product, quotient or remainder."""
    import z3

    return frozenset(
        (
            z3.Z3_OP_BMUL,
            z3.Z3_OP_BSDIV,
            z3.Z3_OP_BUDIV,
            z3.Z3_OP_BSDIV_I,
            z3.Z3_OP_BUDIV_I,
            z3.Z3_OP_BSREM,
            z3.Z3_OP_BUREM,
            z3.Z3_OP_BSREM_I,
            z3.Z3_OP_BUREM_I,
            z3.Z3_OP_BSMOD,
            z3.Z3_OP_BSMOD_I,
        )
    )


def bitwuzla_main(path: str, ms: int) -> int:
    """Bitwuzla on a file (``-``: standard input), printing what the ``bitwuzla`` binary would; ``ms`` 0: no limit."""
    import bitwuzla

    if path == "-":
        with tempfile.NamedTemporaryFile("w", suffix=".smt2", delete=False) as f:
            f.write(sys.stdin.read())
        path = f.name
    options = bitwuzla.Options()
    options.set(bitwuzla.Option.PRODUCE_MODELS, True)
    if ms:
        options.set(bitwuzla.Option.TIME_LIMIT_PER, ms)
    bitwuzla.Parser(bitwuzla.TermManager(), options).parse(path)
    return 0


def bitwuzla(path: str, ms: int, text: str | None = None) -> str:
    """Bitwuzla's whole output in a process of its own (its parser prints to the process's standard output).

    With a limit, the process is also stopped ``SPAWN_S`` after it: Bitwuzla checks its own limit only now and then,
    and on the payout's refined queries ran a 0.3 s limit to 0.5 to 2 s before answering ``unknown``.
    """
    try:
        done = subprocess.run(
            [sys.executable, __file__, "--bitwuzla", "-" if text is not None else path, str(ms)],
            input=text,
            capture_output=True,
            text=True,
            check=False,
            timeout=ms / 1000 + SPAWN_S if ms else None,
        )
    except subprocess.TimeoutExpired:
        return "unknown"
    return done.stdout


def first_word(output: str) -> str:
    return (output.split() or ["unknown"])[0]


def cvc5_int(text: str, ms: int) -> str:
    """cvc5 with bit-vectors encoded as integers: ``sat``, ``unsat`` or ``unknown``."""
    import cvc5

    tm = cvc5.TermManager()
    solver = cvc5.Solver(tm)
    solver.setOption("solve-bv-as-int", "sum")
    solver.setOption("tlimit-per", str(ms))
    symbols = cvc5.SymbolManager(tm)
    parser = cvc5.InputParser(solver, symbols)
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, text, "query")
    while not (command := parser.nextCommand()).isNull():
        if out := command.invoke(solver, symbols):
            return first_word(out)
    return "unknown"


def smtlib(assertions: list[z3.BoolRef]) -> str:
    import z3

    solver = z3.Solver()
    solver.add(*assertions)
    return "(set-logic ALL)\n" + solver.to_smt2()


def walk(assertions: list[z3.BoolRef], stop: Set[int]) -> Iterator[z3.ExprRef]:
    """Every distinct subterm, not below a kind in ``stop``."""
    import z3

    seen: set[int] = set()
    stack: list[z3.ExprRef] = list(assertions)
    while stack:
        e = stack.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        yield e
        if not (z3.is_app(e) and e.decl().kind() in stop):
            stack.extend(e.children())


def nonlinear(e: z3.ExprRef) -> bool:
    import z3

    return z3.is_app(e) and e.decl().kind() in nonlinear_kinds() and not any(z3.is_bv_value(c) for c in e.children())


def generalised(assertions: list[z3.BoolRef]) -> list[z3.BoolRef] | None:
    """Step 2: every outermost product or quotient of two non-constant terms replaced by a fresh variable."""
    import z3

    terms = {e.get_id(): e for e in walk(assertions, nonlinear_kinds()) if nonlinear(e)}
    if not terms:
        return None
    subst = [(e, z3.FreshConst(e.sort(), "opaque")) for e in terms.values()]
    return [z3.substitute(a, *subst) for a in assertions]


def variables(e: z3.ExprRef, memo: dict[int, frozenset[str]]) -> frozenset[str]:
    import z3

    if e.get_id() in memo:
        return memo[e.get_id()]
    if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
        out = frozenset({e.decl().name()})
    else:
        out = frozenset().union(*(variables(c, memo) for c in e.children()))
    memo[e.get_id()] = out
    return out


def slices(assertions: list[z3.BoolRef]) -> Iterator[list[z3.BoolRef]]:
    """Step 3's slices, smallest first, the whole query last."""
    memo: dict[int, frozenset[str]] = {}
    found = [variables(a, memo) for a in assertions]
    known = set(found[-1])
    size = 0
    while True:
        chosen = [a for a, v in zip(assertions, found, strict=True) if v <= known]
        if len(chosen) > size:
            size = len(chosen)
            yield chosen
        if size == len(assertions):
            return
        grown = known.union(*(v for v in found if v & known))
        if grown == known:
            yield assertions
            return
        known = grown


def shift_of(e: z3.ExprRef) -> tuple[z3.ExprRef, int] | None:
    """``(x, k)`` when ``e`` is ``x``'s bits from ``k > 0`` up (``extract(n - 1, k, x)``): ``x >> k`` as z3 writes it,
    alone or under ``concat`` with ``k`` zero bits."""
    import z3

    if not z3.is_app_of(e, z3.Z3_OP_EXTRACT):
        return None
    high, low = e.params()
    x = e.arg(0)
    return (x, low) if high == x.size() - 1 and low > 0 else None


def canonical(e: z3.ExprRef, memo: dict[int, str]) -> str:
    """A key equal for terms equal up to the order of a sum's or product's operands (``c0 + c2``, ``c2 + c0``)."""
    import z3

    if e.get_id() in memo:
        return memo[e.get_id()]
    if z3.is_app(e) and e.num_args() > 0:
        parts = [canonical(c, memo) for c in e.children()]
        if z3.is_app_of(e, z3.Z3_OP_BADD) or z3.is_app_of(e, z3.Z3_OP_BMUL):
            parts.sort()
        key = f"({e.decl().name()}{e.params()} {' '.join(parts)})"
    else:
        key = e.sexpr()
    memo[e.get_id()] = key
    return key


def shifts_opaque(assertions: list[z3.BoolRef]) -> list[z3.BoolRef] | None:
    """Step 3's shifted terms made opaque: each ``x >> k`` (constant ``k``, ``x`` holding no shift) becomes a fresh
    ``y`` whose top ``k`` bits are zero, one ``y`` per ``x`` up to the order of its sums' operands.

    cvc5's integer encoding reasons poorly about products of shifted terms (``reward * (c >> 1)``), while what a
    property needs of them (``(c0 >> 1) + (c2 >> 1) <= (c0 + c2) >> 1``) is among the query's assertions where the
    check proves it first. Sound for ``unsat``: every model of the query is one of this query, with ``y = x >> k``.
    """
    import z3

    memo: dict[int, str] = {}
    shifted: dict[int, bool] = {}

    def holds_shift(e: z3.ExprRef) -> bool:
        if e.get_id() not in shifted:
            shifted[e.get_id()] = shift_of(e) is not None or any(holds_shift(c) for c in e.children())
        return shifted[e.get_id()]

    fresh: dict[tuple[str, int], z3.BitVecRef] = {}
    tops: list[z3.BoolRef] = []

    def opaque(x: z3.ExprRef, k: int) -> z3.BitVecRef:
        key = (canonical(x, memo), k)
        if key not in fresh:
            fresh[key] = y = z3.FreshConst(x.sort(), "shifted")
            tops.append(z3.Extract(x.size() - 1, x.size() - k, y) == 0)
        return fresh[key]

    subst: dict[int, tuple[z3.ExprRef, z3.ExprRef]] = {}
    for e in walk(assertions, set()):
        if z3.is_app_of(e, z3.Z3_OP_CONCAT) and e.num_args() == 2 and z3.is_bv_value(e.arg(0)):
            inner = shift_of(e.arg(1))
            if inner and e.arg(0).as_long() == 0 and e.size() == inner[0].size() and not holds_shift(inner[0]):
                subst[e.get_id()] = (e, opaque(*inner))
        elif (found := shift_of(e)) and not holds_shift(found[0]):
            x, k = found
            subst[e.get_id()] = (e, z3.Extract(x.size() - 1 - k, 0, opaque(x, k)))
    if not subst:
        return None
    return [z3.substitute(a, *subst.values()) for a in assertions] + tops


def squares_bounded(assertions: list[z3.BoolRef]) -> list[z3.BoolRef] | None:
    """Step 3's squaring lemma: each square ``t * t`` becomes a fresh ``v`` and each ``sdiv(t * t, t)`` a fresh ``q``,
    one of each per ``t`` up to the order of its sums' operands, with the lemma's facts guarded by its range.

    The lemma (``check_squareLemma`` in Symbolic.t.sol, proven by halmos): for a 256-bit ``t`` with
    ``-2^121 <= t <= 2^121`` (signed), ``t * t`` does not wrap, so ``0 <= t * t <= 2^242`` (signed), and
    ``sdiv(t * t, t) == t`` when ``t != 0``. The facts added are ``range(t) => 0 <= v <= 2^242``, ``t == 0 => v == 0``
    and ``range(t) and t != 0 => q == t``. Sound for ``unsat``: every model of the query is one of this query, with
    ``v = t * t`` and ``q = sdiv(t * t, t)``, which satisfy the facts by the lemma whatever ``t`` is (where ``t`` is
    out of range the guarded facts say nothing). What is left, whether ``t`` is in range, is linear in the inputs'
    ranges, which Bitwuzla decides at once where its bit-blasted products and quotients do not finish.
    """
    import z3

    memo: dict[int, str] = {}
    found: dict[str, tuple[z3.BitVecRef, z3.BitVecRef]] = {}
    quotients: dict[str, tuple[z3.BitVecRef, z3.BitVecRef]] = {}
    subst: dict[int, tuple[z3.ExprRef, z3.ExprRef]] = {}

    def magnitude(e: z3.ExprRef) -> z3.ExprRef:
        """``x`` for ``-x`` (``bvneg`` or a product by -1), else ``e``: ``(-x) * (-x)`` is ``x * x`` in every width."""
        if z3.is_app_of(e, z3.Z3_OP_BNEG):
            return e.arg(0)
        if z3.is_app_of(e, z3.Z3_OP_BMUL) and e.num_args() == 2:
            minus = (1 << e.size()) - 1
            for k in (0, 1):
                if z3.is_bv_value(e.arg(k)) and e.arg(k).as_long() == minus:
                    return e.arg(1 - k)
        return e

    def square_of(e: z3.ExprRef) -> str | None:
        """``t``'s key where ``e`` is ``t * t`` or ``(-t) * (-t)``; not for ``(-t) * t``, which is not a square."""
        if not (z3.is_app_of(e, z3.Z3_OP_BMUL) and e.num_args() == 2 and nonlinear(e)):
            return None
        if canonical(e.arg(0), memo) != canonical(e.arg(1), memo):
            return None
        return canonical(magnitude(e.arg(0)), memo)

    for e in walk(assertions, set()):
        if (key := square_of(e)) is not None:
            if key not in found:
                found[key] = (magnitude(e.arg(0)), z3.FreshConst(e.sort(), "square"))
            subst[e.get_id()] = (e, found[key][1])
        elif (
            z3.is_app(e)
            and e.decl().kind() in (z3.Z3_OP_BSDIV, z3.Z3_OP_BSDIV_I)
            and (key := square_of(e.arg(0))) is not None
            and canonical(e.arg(0).arg(0), memo) == canonical(e.arg(0).arg(1), memo) == canonical(e.arg(1), memo)
        ):
            root = canonical(e.arg(1), memo)
            if root not in quotients:
                quotients[root] = (e.arg(1), z3.FreshConst(e.sort(), "root"))
            subst[e.get_id()] = (e, quotients[root][1])
    if not found:
        return None
    bound = 1 << SQUARE_BITS
    facts: list[z3.BoolRef] = []
    for t, v in found.values():
        in_range = z3.And(t >= -bound, t <= bound)
        facts += [z3.Implies(in_range, z3.And(v >= 0, v <= bound * bound)), z3.Implies(t == 0, v == 0)]
    for t, q in quotients.values():
        facts.append(z3.Implies(z3.And(t >= -bound, t <= bound, t != 0), q == t))
    return [z3.substitute(a, *subst.values()) for a in assertions] + facts


def constant_quotients(assertions: list[z3.BoolRef]) -> list[z3.BoolRef]:
    """Each quotient ``sdiv(x, c)`` by a constant ``c >= 2`` as a fresh ``q`` with the facts of truncated division.

    SMT-LIB's ``bvsdiv`` truncates toward zero: for ``x >= 0``, ``0 <= q <= x`` and ``0 <= x - c * q <= c - 1``; for
    ``x < 0``, ``x <= q <= 0`` and ``1 - c <= x - c * q <= 0`` (``c * q`` does not wrap, as ``|c * q| <= |x|``).
    Sound for ``unsat``: every model of the query is one of this query, with ``q = sdiv(x, c)``. The split Shapley
    values divide by ``M!`` (2 for two parties), and with the quotients linear, what the values' efficiency needs of
    them (``sdiv(a, 2) + sdiv(b, 2)`` within one of ``(a + b) / 2``) is linear too.
    """
    import z3

    subst: dict[int, tuple[z3.ExprRef, z3.ExprRef]] = {}
    facts: list[z3.BoolRef] = []
    for e in walk(assertions, set()):
        if not (z3.is_app(e) and e.decl().kind() in (z3.Z3_OP_BSDIV, z3.Z3_OP_BSDIV_I) and z3.is_bv_value(e.arg(1))):
            continue
        c = e.arg(1).as_signed_long()
        if c < 2:
            continue
        x, q = e.arg(0), z3.FreshConst(e.sort(), "quotient")
        subst[e.get_id()] = (e, q)
        r = x - c * q
        facts += [
            z3.Implies(x >= 0, z3.And(q >= 0, q <= x, r >= 0, r <= c - 1)),
            z3.Implies(x < 0, z3.And(q <= 0, q >= x, r <= 0, r >= 1 - c)),
        ]
    if not subst:
        return assertions
    return [z3.substitute(a, *subst.values()) for a in assertions + facts]


def sign_cases(assertions: list[z3.BoolRef]) -> Iterator[list[z3.BoolRef]]:
    """Step 3's sign cases: each sum that is a factor of a product becomes ``n >= 0`` or ``-n`` with ``n > 0``."""
    import z3

    sums = {
        c.get_id(): c
        for e in walk(assertions, set())
        if z3.is_app_of(e, z3.Z3_OP_BMUL) and nonlinear(e)
        for c in e.children()
        if z3.is_app_of(c, z3.Z3_OP_BADD)
    }
    if not sums or len(sums) > MAX_SUMS:
        return
    for signs in itertools.product((False, True), repeat=len(sums)):
        subst, defining = [], []
        for i, (s, negative) in enumerate(zip(sums.values(), signs, strict=True)):
            n = z3.BitVec(f"sign_case_{i}", s.size())
            if negative:
                subst.append((s, -n))
                defining += [-n == s, z3.ULE(1, n), z3.ULE(n, 1 << (s.size() - 1))]
            else:
                subst.append((s, n))
                defining += [n == s, n >= 0]
        yield [z3.substitute(a, *subst) for a in assertions] + defining


def proven(assertions: list[z3.BoolRef], squares: bool = True) -> bool:
    """Steps 2 and 3: whether the query is shown unsatisfiable (``squares``: with the squaring lemma)."""
    squared = squares_bounded(assertions) if squares else None
    if squared is None:
        general = generalised(assertions)
        if general is not None and first_word(bitwuzla("", SLICE_MS, smtlib(general))) == "unsat":
            return True
    else:
        if first_word(bitwuzla("", SQUARED_MS, smtlib(squared))) == "unsat":
            return True
        linear = constant_quotients(squared)
        linear = generalised(linear) or linear
        if any(cvc5_int(smtlib(chosen), CASE_MS) == "unsat" for chosen in slices(linear)):
            return True
    for chosen in slices(assertions):
        if cvc5_int(smtlib(chosen), SLICE_MS) == "unsat":
            return True
        opaque = shifts_opaque(chosen)
        if opaque is not None and cvc5_int(smtlib(opaque), CASE_MS) == "unsat":
            return True
        cases = list(sign_cases(chosen))
        if cases and all(cvc5_int(smtlib(case), CASE_MS) == "unsat" for case in cases):
            return True
    return False


def main(path: str, squares: bool = True) -> int:
    """Answer one query (``squares`` False: without the squaring lemma, for the check that proves it)."""
    import z3
    from halmos_integers import refuted

    assertions = list(z3.parse_smt2_file(path))
    # step 0 reasons about squares as the lemma does, so the check that proves the lemma runs without it too
    if squares and refuted(assertions):
        print("unsat")
        return 0
    quick = bitwuzla(path, QUICK_MS)
    if first_word(quick) in ("sat", "unsat"):
        sys.stdout.write(quick)
        return 0
    if proven(assertions, squares):
        print("unsat")
        return 0
    sys.stdout.write(bitwuzla(path, 0))
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "--bitwuzla":
        sys.exit(bitwuzla_main(sys.argv[2], int(sys.argv[3])))
    from halmos_server import ask

    if ask(sys.argv[1:]):
        sys.exit(0)
    if sys.argv[1] == "--without-squares":
        sys.exit(main(sys.argv[2], squares=False))
    sys.exit(main(sys.argv[1]))
