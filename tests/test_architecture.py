"""The package's shape (docs/design.md, "Layout"): no import cycle anywhere (imports inside functions included), no
import that climbs back up a floor, modules and functions small enough to read, attacks/ and metrics/ never reaching
torch or transformers (every attack is recomputed from stored signals in seconds), and a command line that starts
without the heavy libraries."""

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "lmaudit"
HEAVY = ("torch", "transformers", "opacus", "peft", "accelerate")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, known: set[str]) -> tuple[set[str], set[str]]:
    """The package's modules that `path` imports (anywhere in it) and the top-level names of everything else."""
    inner, outer = set(), set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for name in names:
            if name.startswith("lmaudit"):
                while name not in known:  # lmaudit.x.y where y is a function of module lmaudit.x
                    name = name.rsplit(".", 1)[0]
                inner.add(name)
            else:
                outer.add(name.split(".")[0])
    return inner, outer


def import_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    known = set(paths)
    graph, external = {}, {}
    for name, path in paths.items():
        graph[name], external[name] = imports_of(path, known)
        graph[name].discard(name)
    return graph, external


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph, as a list of modules, or None."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                return stack[stack.index(target):] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_import_graph_has_no_cycle():
    graph, _ = import_graph()
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_cycle_finder_finds_a_planted_cycle():
    graph, _ = import_graph()
    graph["lmaudit.attacks.base"] = graph["lmaudit.attacks.base"] | {"lmaudit.audit.run"}
    assert find_cycle(graph) is not None


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo += graph[node]
    return seen


def test_attacks_and_metrics_never_reach_torch():
    graph, external = import_graph()
    pure = [m for m in graph if m.startswith(("lmaudit.attacks", "lmaudit.metrics"))]
    assert len(pure) > 10
    for module in pure:
        heavy = {name for dependency in reachable(graph, module) for name in external[dependency] if name in HEAVY}
        assert not heavy, f"{module} reaches {heavy}"
    # And in a fresh interpreter: importing all of them loads none of the heavy libraries.
    code = "import sys\n" + "".join(f"import {m}\n" for m in pure) + f"print(sorted(set(sys.modules) & set({HEAVY!r})))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"


# The distribution that provides each imported top-level name, where the two differ.
DISTRIBUTIONS = {"sklearn": "scikit-learn", "yaml": "pyyaml", "jinja2": "jinja2", "mlflow": "mlflow-skinny"}
# Declared but never imported, each on purpose: transformers needs accelerate for device_map="auto".
USED_WITHOUT_IMPORT = {"accelerate"}


def declared_dependencies() -> tuple[set[str], set[str]]:
    """The core dependencies and the optional extras' (lower-case distribution names) of pyproject.toml."""
    import re
    import tomllib

    project = tomllib.loads((PACKAGE.parents[1] / "pyproject.toml").read_text())["project"]

    def names(requirements):
        return {re.split(r"[<>=!\[; ]", requirement, maxsplit=1)[0].lower() for requirement in requirements}

    return names(project["dependencies"]), names(r for extra in project["optional-dependencies"].values() for r in extra)


def test_every_import_is_declared_and_every_dependency_is_used():
    _, external = import_graph()
    third_party = {name for names in external.values() for name in names} - set(sys.stdlib_module_names) - {"lmaudit"}
    imported = {DISTRIBUTIONS.get(name, name).lower() for name in third_party}
    core, extras = declared_dependencies()
    assert imported - core - extras == set(), "imported but not declared"
    assert core - imported - USED_WITHOUT_IMPORT == set(), "declared but never imported"


# The package's floors, lowest first (docs/design.md, "Layout"): a module imports modules of its own floor or below,
# never above. "lmaudit" is the package's own __init__ (its version).
FLOORS = (
    ("lmaudit", "errors", "atomic", "logs", "locks", "strict_json"),
    ("data", "models", "backends", "serving"),
    ("signals", "attacks"),
    ("metrics",),
    ("config", "report"),
    ("audit",),
    ("api", "canaries", "training"),
    ("studies",),
    ("cli",),
)
FLOOR_OF = {part: floor for floor, parts in enumerate(FLOORS) for part in parts}


def part_of(module: str) -> str:
    """The top-level module or package of `lmaudit.x.y` (x), or 'lmaudit' for the package itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "lmaudit"


def imports_up(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a floor to a higher one, as 'module -> module'."""
    return [f"{module} -> {target}" for module, targets in sorted(graph.items()) for target in sorted(targets)
            if FLOOR_OF[part_of(target)] > FLOOR_OF[part_of(module)]]


def test_every_module_stands_on_a_floor_and_no_import_climbs_back_up():
    graph, _ = import_graph()
    assert {part_of(module) for module in graph} == set(FLOOR_OF), "place every new top-level module in FLOORS"
    assert imports_up(graph) == []


def test_the_floor_check_finds_a_planted_import_up():
    graph, _ = import_graph()
    graph["lmaudit.models.train"] = graph["lmaudit.models.train"] | {"lmaudit.signals.base"}
    assert imports_up(graph) == ["lmaudit.models.train -> lmaudit.signals.base"]


MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80
MAX_PARAMETERS = 10  # more travel in a settings object (a dataclass or pydantic model), or as a command's **options


def parameter_count(function: ast.FunctionDef) -> int:
    """A function's parameters, self and cls aside; *args and **kwargs count one each."""
    arguments = function.args
    names = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    count = len(names) + (arguments.vararg is not None) + (arguments.kwarg is not None)
    return count - (bool(names) and names[0].arg in ("self", "cls"))


def oversized(path: Path) -> list[str]:
    """What in one module breaks the size rules: the module's length, each function's length and parameters."""
    text = path.read_text()
    found = [f"{path.name}: {len(text.splitlines())} lines"] if len(text.splitlines()) > MAX_MODULE_LINES else []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_FUNCTION_LINES or parameter_count(node) > MAX_PARAMETERS:
                found.append(f"{path.name}:{node.lineno} {node.name}: {lines} lines, {parameter_count(node)} parameters")
    return found


def test_modules_and_functions_are_small_enough_to_read():
    """No module over 400 lines, no function over 80 lines or with more than 10 parameters."""
    assert [problem for path in sorted(PACKAGE.rglob("*.py")) for problem in oversized(path)] == []


def test_the_size_check_counts_parameters_and_lines(tmp_path):
    arguments = ", ".join(f"a{i}" for i in range(10))
    body = "\n".join(f"    x{i} = {i}" for i in range(80))
    (tmp_path / "big.py").write_text(f"def wide(self, {arguments}, *rest): pass\ndef narrow(self, {arguments}): pass\n"
                                     f"def long():\n{body}\n")
    assert oversized(tmp_path / "big.py") == ["big.py:1 wide: 1 lines, 11 parameters", "big.py:3 long: 81 lines, 0 parameters"]


def test_the_command_line_starts_without_the_heavy_libraries():
    """`import lmaudit.cli` (what `lmaudit --help` runs) loads none of torch, transformers, scikit-learn, opacus, peft,
    accelerate, nor pandas, numpy or matplotlib: they load when a command needs them."""
    heavy = (*HEAVY, "sklearn", "pandas", "numpy", "matplotlib", "scipy")
    code = f"import sys, lmaudit.cli\nprint(sorted(set(sys.modules) & set({heavy!r})))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"


def document_writers(path: Path) -> list[str]:
    """Where a module writes an output document itself: a call that writes JSON or stages files and names a document
    of DOCUMENTS (its file name, or a module-level name bound to it) among its arguments."""
    from lmaudit.report.documents import DOCUMENTS

    tree = ast.parse(path.read_text(encoding="utf-8"))
    bound = {target.id for node in tree.body if isinstance(node, ast.Assign)
             for target, value in _pairs(node) if isinstance(target, ast.Name)
             and isinstance(value, ast.Constant) and value.value in DOCUMENTS}

    def names_a_document(call: ast.Call) -> bool:
        return any((isinstance(node, ast.Constant) and node.value in DOCUMENTS) or
                   (isinstance(node, ast.Name) and node.id in bound) for node in ast.walk(call))

    return [f"{path.name}:{node.lineno}" for node in ast.walk(tree) if isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("dump", "dumps", "staged", "write_text")
            and names_a_document(node)]


def _pairs(node: ast.Assign) -> list[tuple[ast.expr, ast.expr]]:
    """(target, value) of an assignment, `A, B = 1, 2` unpacked."""
    pairs = []
    for target in node.targets:
        if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
            pairs += list(zip(target.elts, node.value.elts, strict=False))
        else:
            pairs.append((target, node.value))
    return pairs


def test_output_documents_are_written_by_the_staged_writer_only():
    """report.json and every other output document are written by report/documents.py's write_document (one header,
    strict JSON, the page and table with it, all or none): no other module that names one writes JSON or stages files."""
    offenders = [hit for path in sorted(PACKAGE.rglob("*.py")) if path.name != "documents.py" for hit in document_writers(path)]
    assert offenders == []


def test_the_document_writer_check_finds_a_planted_writer(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('import json\nRESULT, TABLE = "extraction.json", "x.parquet"\n'
                       'def write(d, p):\n    (p / RESULT).write_text(json.dumps(d))\n    (p / "x").write_text("")\n')
    assert document_writers(planted) == ["planted.py:4"]


# metrics/ computes, report/ words (docs/design.md, "Layout"): no string of READER_WORDS or more words (an f-string's
# each placeholder one word) stands in a metrics module, except a docstring, an error's message (inside `raise`), a
# why-not of the typed records (a value put into an `unavailable` mapping or under its key, a `Skipped`'s reason), a
# setting's `description=` (its documentation), and these names of what was computed, stored beside the numbers as
# part of the record (a field of `LeakageTests`, which report/document.py embeds, or the first key of a dict):
READER_WORDS = 6
RECORD_TEXTS = {
    ("permutation_tests.py", "NULL"),  # LeakageTests.null: the null hypothesis the permutation tests test
    ("population_fit.py", "TEST"),  # validity.population.test: which test the rejections come from
    ("validity.py", "blind_baseline"),  # validity.blind_baseline: which classifiers the blind baseline is
}


def _names_why_not(target: ast.expr) -> bool:
    """`unavailable = ...` or `unavailable[key] = ...`."""
    target = target.value if isinstance(target, ast.Subscript) else target
    return isinstance(target, ast.Name) and target.id == "unavailable"


def _exempt(chain: list[ast.AST], module: str) -> bool:
    """Whether a string whose ancestors are `chain` (the string first, the module last) may stand in a metrics module."""
    for child, parent in zip(chain, chain[1:], strict=False):
        if isinstance(parent, ast.Raise) or (isinstance(parent, ast.keyword) and parent.arg == "description"):
            return True
        if isinstance(parent, ast.Call) and getattr(parent.func, "id", getattr(parent.func, "attr", None)) == "Skipped":
            return True
        if isinstance(parent, ast.Assign | ast.AnnAssign | ast.AugAssign) and child is parent.value:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            if any(_names_why_not(t) or (isinstance(t, ast.Name) and (module, t.id) in RECORD_TEXTS) for t in targets):
                return True
        if isinstance(parent, ast.Dict) and child in parent.values:
            key = parent.keys[parent.values.index(child)]
            if isinstance(key, ast.Constant) and (key.value == "unavailable" or (module, key.value) in RECORD_TEXTS):
                return True
    return False


def reader_texts(path: Path) -> list[str]:
    """Every string of READER_WORDS or more words in a module that no exemption above covers, as 'module:line text'."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    docstrings = {node.body[0].value for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(part.value if isinstance(part, ast.Constant) else " {} " for part in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and not isinstance(parents.get(node), ast.JoinedStr):
            text = node.value
        else:
            continue
        chain = [node]
        while chain[-1] in parents:
            chain.append(parents[chain[-1]])
        if len(text.split()) >= READER_WORDS and node not in docstrings and not _exempt(chain, path.name):
            found.append(f"{path.name}:{node.lineno} {' '.join(text.split())[:60]!r}")
    return sorted(found, key=lambda hit: int(hit.split(":")[1].split()[0]))


def test_metrics_produce_no_text_meant_for_a_reader():
    """metrics/ returns typed numbers and flags; report/ words them (warnings, verdicts, rules, summary lines)."""
    offenders = [hit for path in sorted((PACKAGE / "metrics").glob("*.py")) for hit in reader_texts(path)]
    assert offenders == [], "words in metrics/ (move them to report/): " + "; ".join(offenders)


def test_the_reader_text_check_finds_a_planted_sentence(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        '"""A docstring of many words, which is fine here."""\n'
        'def f(n, unavailable, Skipped):\n'
        '    """Another docstring of many words, fine too."""\n'
        '    unavailable["x"] = f"only {n} units, and at least two are needed"\n'
        '    s = Skipped("a", "b", f"{n} members and no non-members; need 2 of each")\n'
        '    if n < 0:\n'
        '        raise ValueError(f"n must be at least zero here, not {n}")\n'
        '    short = f"{n} of {n} right"\n'
        '    return {"unavailable": "no texts: the audit started from precomputed scores",\n'
        '            "verdict": f"consistent: the bound {n} is below the accountant\'s epsilon"}\n')
    assert reader_texts(planted) == ["planted.py:10 \"consistent: the bound {} is below the accountant's epsilon\""]


# Each file lmaudit writes beside the documents under a fixed name, and the one module that writes it through its model.
SIDE_FILE_WRITERS = {"lmaudit_training.json": "training_file.py", "lmaudit_checkpoint_audits.json": "checkpoint_audit.py",
                     "cell.json": "runner.py", "privacy_evaluation.json": "model_card.py"}
WRITING_CALLS = ("dump", "dumps", "staged", "write_text", "write_bytes", "open")


def side_file_writes(paths: list[Path]) -> dict[str, set[str]]:
    """For each file of SIDE_FILE_WRITERS, the modules among `paths` with a writing call that names it: its file name,
    or a module-level name bound to it anywhere in `paths` (so an imported constant counts too)."""
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in paths}
    constants = {target.id: value.value for tree in trees.values() for node in tree.body if isinstance(node, ast.Assign)
                 for target, value in _pairs(node) if isinstance(target, ast.Name)
                 and isinstance(value, ast.Constant) and value.value in SIDE_FILE_WRITERS}
    found: dict[str, set[str]] = {name: set() for name in SIDE_FILE_WRITERS}
    for path, tree in trees.items():
        for call in ast.walk(tree):
            if not (isinstance(call, ast.Call) and getattr(call.func, "attr", getattr(call.func, "id", None)) in WRITING_CALLS):
                continue
            for node in ast.walk(call):
                if isinstance(node, ast.Constant) and node.value in SIDE_FILE_WRITERS:
                    found[node.value].add(path.name)
                elif isinstance(node, ast.Name) and node.id in constants:
                    found[constants[node.id]].add(path.name)
    return found


def test_each_side_file_is_written_by_its_one_module():
    """lmaudit_training.json, the checkpoint audits, a study cell's record and the model card's evaluation are each
    written in one module, which validates them against their model (docs/schema/) first: no other module writes one."""
    found = side_file_writes(sorted(PACKAGE.rglob("*.py")))
    assert found == {name: {module} for name, module in SIDE_FILE_WRITERS.items()}


def test_the_side_file_check_finds_a_planted_writer_of_an_imported_name(tmp_path):
    (tmp_path / "source.py").write_text('SUMMARY_FILE = "lmaudit_training.json"\n')
    (tmp_path / "planted.py").write_text("import json\nfrom source import SUMMARY_FILE\n"
                                         "def write(p):\n    (p / SUMMARY_FILE).write_text(json.dumps({}))\n")
    assert side_file_writes([tmp_path / "source.py", tmp_path / "planted.py"])["lmaudit_training.json"] == {"planted.py"}
