"""Issue 14, the analyst's day: each friction quoted in the issue, replayed as a CLI command.

Every test named ``test_friction_*`` runs the exact command the issue quotes (in a temporary
directory holding a ``survey.csv`` -- ``answer`` 0/1, ``age``, ``region`` 0..3 -- and a
``reg.csv`` -- ``x1``, ``x2``, ``y``), and checks that the friction is gone.
"""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from privpost.cli import app

runner = CliRunner()


def run(*args):
    res = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in res.output
    return res


@pytest.fixture
def work(tmp_path, monkeypatch):
    rng = np.random.default_rng(14)
    n = 500
    answer = rng.binomial(1, 0.3, n)
    age = rng.integers(18, 91, n)
    region = rng.integers(0, 4, n)
    names = np.array(["north", "south", "east", "west"])
    (tmp_path / "survey.csv").write_text(
        "answer,age,region,region_name\n"
        + "".join(f"{a},{b},{c},{names[c]}\n" for a, b, c in zip(answer, age, region)))
    x = rng.normal(size=(200, 2))
    y = 1 + x @ [2.0, -1.0] + rng.normal(size=200)
    np.savetxt(tmp_path / "reg.csv", np.column_stack([x, y]), delimiter=",",
               header="x1,x2,y", comments="")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def load(path):
    return json.loads(open(path).read())


# ------------------------------------------------------------------ 1. every query from flags
def test_friction_regression_space_separated_columns(work):
    # the exact command: no longer "unexpected extra argument(s) (x2 y)"; it asks for bounds
    res = run("release", "reg.csv", "--query", "regression_stats", "--column", "x1", "x2", "y",
              "--epsilon", "1")
    assert res.exit_code == 1
    assert "extra argument" not in res.output
    assert "--bounds" in res.output and "x1=" in res.output
    # with one --bounds for every column (the issue's `--bounds -5,5`)
    res = run("release", "reg.csv", "--query", "regression_stats", "--column", "x1", "x2", "y",
              "--epsilon", "1", "--bounds", "-5,5", "--seed", "1")
    assert res.exit_code == 0, res.output
    doc = load(work / "reg-release.json")
    assert doc["query"]["columns"] == ["x1", "x2", "y"]
    assert doc["query"]["bounds_x"] == [[-5, 5], [-5, 5]] and doc["query"]["bounds_y"] == [-5, 5]


def test_friction_regression_per_column_bounds(work):
    res = run("release", "reg.csv", "--query", "regression_stats", "--column", "x1", "x2", "y",
              "--bounds", "x1=-4,4", "--bounds", "x2=-3,3", "--bounds", "y=-10,10",
              "--epsilon", "1", "-o", "r.json")
    assert res.exit_code == 0, res.output
    q = load(work / "r.json")["query"]
    assert q["bounds_x"] == [[-4, 4], [-3, 3]] and q["bounds_y"] == [-10, 10]
    # a named entry overrides the default; a wrong name is refused, naming the columns
    res = run("release", "reg.csv", "--query", "regression_stats", "--column", "x1,x2,y",
              "--bounds", "-5,5", "--bounds", "y=-10,10", "--epsilon", "1", "-o", "r2.json")
    assert res.exit_code == 0, res.output
    q = load(work / "r2.json")["query"]
    assert q["bounds_x"] == [[-5, 5], [-5, 5]] and q["bounds_y"] == [-10, 10]
    res = run("release", "reg.csv", "--query", "regression_stats", "--column", "x1", "x2", "y",
              "--bounds", "-5,5", "--bounds", "z=-1,1", "--epsilon", "1", "-o", "r3.json")
    assert res.exit_code == 1 and "'z'" in res.output and "x1" in res.output


def test_columns_before_the_data_file_and_repeated(work):
    res = run("release", "--column", "x1", "x2", "y", "reg.csv", "--query", "regression_stats",
              "--bounds", "-5,5", "--epsilon", "1", "-o", "a.json")
    assert res.exit_code == 0, res.output
    res = run("release", "reg.csv", "--column", "x1", "--column", "x2", "--column", "y",
              "--query", "regression_stats", "--bounds", "-5,5", "--epsilon", "1", "-o", "b.json")
    assert res.exit_code == 0, res.output
    assert load(work / "a.json")["query"] == load(work / "b.json")["query"]


def test_friction_mean_defaults_n_to_rows(work):
    # the exact command: the remaining problem is the missing privacy target, not n
    res = run("release", "survey.csv", "--query", "mean", "--bounds", "18,90", "--column", "age")
    assert res.exit_code == 1
    assert "query.n" not in res.output and "--epsilon" in res.output
    res = run("release", "survey.csv", "--query", "mean", "--bounds", "18,90", "--column", "age",
              "--epsilon", "1")
    assert res.exit_code == 0, res.output
    assert "public n = 500" in res.output
    doc = load(work / "survey-release.json")
    assert doc["query"]["n"] == 500 and doc["n"] == 500
    # the denominator enters the sensitivity: (90 - 18) / 500
    assert doc["mechanism"]["sensitivity"] == pytest.approx(72 / 500)
    res = run("release", "survey.csv", "--query", "mean", "--bounds", "18,90", "--column", "age",
              "--epsilon", "1", "--n", "400", "-o", "m4.json")
    assert res.exit_code == 1 and "400" in res.output      # public n must match the rows


def test_friction_release_remembers_its_column(work):
    res = run("release", "survey.csv", "--query", "sum", "--bounds", "0,1", "--column", "answer",
              "--epsilon", "1", "-o", "s.json")
    assert res.exit_code == 0, res.output
    res = run("inspect", "s.json", "--json")
    doc = json.loads(res.stdout)
    assert doc["query"]["columns"] == ["answer"] and doc["labels"] == ["sum(answer)"]
    res = run("inspect", "s.json")
    assert "sum(answer)" in res.output and '"x"' not in res.output


# ------------------------------------------------------------------ 2. specs from the release
def test_friction_dirichlet_k_from_the_release(work):
    assert run("release", "survey.csv", "--query", "histogram", "--categories", "4",
               "--column", "region", "--epsilon", "1", "--seed", "2", "-o", "r2.json"
               ).exit_code == 0
    # the issue: "histogram coordinates are all labelled `count`" (Rich ate the [..] part)
    res = run("inspect", "r2.json")
    assert all(f"count[region={j}]" in res.output for j in range(4)), res.output
    res = run("infer", "r2.json", "--model", "dirichlet-categorical", "--method", "gibbs-ss",
              "--draws", "200", "--warmup", "100", "--chains", "2", "--seed", "1",
              "--no-progress")
    assert res.exit_code == 0, res.output
    assert "k = 4 (from the release)" in res.output and "p[3]" in res.output


def test_model_sizes_from_regression_and_naive_bayes_releases(work):
    from privpost.models.spec import complete_spec, model_for_release
    from privpost.queries import NaiveBayesCounts, RegressionStats
    from privpost.mechanisms import Laplace
    from privpost.releases.release import release

    rel = release(np.zeros((5, 3)), query=RegressionStats([(-1, 1)] * 2, (-1, 1)),
                  mechanism=Laplace(epsilon=1), seed=0)
    model, inferred = model_for_release("linear-regression:sigma2=1", rel)
    assert inferred == {"p": 2} and model.p == 2
    assert complete_spec("linear-regression:p=2,sigma2=1", rel)[1] == {}
    nb = release(np.array([[0, 1, 2], [1, 0, 0]]), query=NaiveBayesCounts(2, [2, 3]),
                 mechanism=Laplace(epsilon=1), seed=0)
    model, inferred = model_for_release("naive-bayes", nb)
    assert inferred == {"n_classes": 2, "n_levels": [2, 3]}
    assert model.n_classes == 2 and model.n_levels == (2, 3)
    one = release(np.array([[0, 1], [1, 3]]), query=NaiveBayesCounts(2, [4]),
                  mechanism=Laplace(epsilon=1), seed=0)
    model, inferred = model_for_release("naive-bayes", one)
    assert inferred == {"n_classes": 2, "n_levels": [4]} and model.n_levels == (4,)
    # a stated size is kept, so a contradicting one is still caught by the model's check
    from privpost.errors import IncompatibleError
    from privpost.queries import Histogram

    hist = release(np.array([0, 1, 2, 3]), query=Histogram(4), mechanism=Laplace(epsilon=1),
                   seed=0)
    model, inferred = model_for_release("dirichlet-categorical:alpha=1,k=3", hist)
    assert inferred == {} and model.k == 3
    with pytest.raises(IncompatibleError):
        model.check_query(hist.query)


# ------------------------------------------------------------------ 7/9. smaller frictions
def test_friction_discrete_laplace_on_a_01_sum(work):
    res = run("release", "survey.csv", "--query", "sum", "--bounds", "0,1", "--column", "answer",
              "--mechanism", "discrete_laplace", "--epsilon", "1", "--seed", "3", "-o", "d.json")
    assert res.exit_code == 0, res.output
    doc = load(work / "d.json")
    assert doc["query"]["integer"] is True and float(doc["observed"][0]).is_integer()
    # a non-integer column is refused for an integer sum, naming the row
    (work / "frac.csv").write_text("v\n0\n0.5\n1\n")
    res = run("release", "frac.csv", "--query", "sum", "--bounds", "0,1", "--column", "v",
              "--mechanism", "discrete_laplace", "--epsilon", "1", "-o", "f.json")
    assert res.exit_code == 1 and "row 1" in res.output and "integer" in res.output
    res = run("infer", "d.json", "--model", "beta-bernoulli:a=1,b=1", "--draws", "200",
              "--warmup", "100", "--chains", "1", "--seed", "1", "--no-progress", "--json")
    assert res.exit_code == 0, res.output


def test_integer_sum_query_sensitivity_and_wrong_variant():
    from privpost.errors import ReleaseError
    from privpost.queries import Sum, query_from_dict

    q = Sum((0, 3), integer=True)
    # brute force over the integer domain {0..3} (and values outside, clamped)
    vals = np.arange(-2, 6)
    diffs = [abs(q.statistic([a])[0] - q.statistic([b])[0]) for a in vals for b in vals]
    assert max(diffs) == q.sensitivity("l1", "replace") == 3
    assert max(abs(q.statistic([a])[0]) for a in vals) == q.sensitivity("l1", "add-remove") == 3
    assert q.t(np.array([0.6, 2.4]), check=False).ravel().tolist() == [1.0, 2.0]
    assert query_from_dict(q.to_dict()) == q and "integer" not in Sum((0, 1)).to_dict()
    with pytest.raises(ReleaseError, match="integer bounds"):
        Sum((0, 1.5), integer=True)


def test_friction_string_categories(work):
    # the friction: "row 1 is not a number ('north')" -- now the message says what to type
    res = run("release", "survey.csv", "--query", "histogram", "--categories", "4",
              "--column", "region_name", "--epsilon", "1", "-o", "h.json")
    assert res.exit_code == 1 and "--levels" in res.output
    res = run("release", "survey.csv", "--query", "histogram", "--levels",
              "north,south,east,west", "--column", "region_name", "--epsilon", "1",
              "--seed", "1", "-o", "h.json")
    assert res.exit_code == 0, res.output
    doc = load(work / "h.json")
    assert doc["query"]["levels"] == ["north", "south", "east", "west"]
    assert doc["labels"][0] == "count[region_name=north]"
    res = run("inspect", "h.json")
    assert "count[region_name=west]" in res.output     # labels are not eaten as Rich markup
    # same counts as coding the regions by hand
    assert run("release", "survey.csv", "--query", "histogram", "--categories", "4",
               "--column", "region", "--epsilon", "1", "--seed", "1", "-o", "h2.json"
               ).exit_code == 0
    assert load(work / "h2.json")["observed"] == doc["observed"]
    res = run("release", "survey.csv", "--query", "histogram", "--levels", "north,south,east",
              "--column", "region_name", "--epsilon", "1", "-o", "h3.json")
    assert res.exit_code == 1 and "add it to --levels" in res.output


def test_friction_missing_epsilon_names_the_flag(work):
    res = run("release", "survey.csv", "--query", "sum", "--bounds", "0,1", "--column", "answer",
              "-o", "x.json")
    assert res.exit_code == 1
    assert "parameterisation" not in res.output
    assert "--epsilon" in res.output and "--scale" in res.output


def test_friction_missing_column_names_the_flag(work):
    res = run("release", "survey.csv", "--query", "sum", "--bounds", "0,1", "--epsilon", "1",
              "-o", "x.json")
    assert res.exit_code == 1
    assert "missing column(s) 'x'" not in res.output
    assert "--column" in res.output and "'answer'" in res.output


def test_friction_version():
    from privpost import __version__

    res = run("--version")
    assert res.exit_code == 0 and res.output.strip() == f"privpost {__version__}"


def test_friction_output_is_not_overwritten(work):
    args = ["release", "survey.csv", "--query", "sum", "--bounds", "0,1", "--column", "answer",
            "--epsilon", "1", "-o", "s.json"]
    assert run(*args).exit_code == 0
    before = (work / "s.json").read_text()
    res = run(*args)
    assert res.exit_code == 1 and "--force" in res.output
    assert (work / "s.json").read_text() == before
    assert run(*args, "--force").exit_code == 0


@pytest.mark.parametrize("method", ["damcmc", "gibbs-ss", "naive"])
def test_friction_one_progress_display_for_every_method(work, method):
    # the issue: "damcmc shows a progress bar, gibbs-ss prints lines, naive shows nothing"
    assert run("release", "survey.csv", "--query", "sum", "--bounds", "0,1", "--column", "answer",
               "--epsilon", "1", "--seed", "1", "-o", "s.json").exit_code == 0
    res = run("infer", "s.json", "--model", "beta-bernoulli", "--method", method,
              "--draws", "100", "--warmup", "50", "--chains", "1", "--seed", "1")
    assert res.exit_code == 0, res.output
    bar = [line for line in res.output.splitlines() if "iterations" in line]
    assert len(bar) == 1 and bar[0].split()[0] == method, res.output
    assert f"[{method}]" not in res.output            # no per-10% lines


def test_naive_bayes_tables_from_flags(work):
    res = run("release", "survey.csv", "--query", "naive_bayes_counts", "--column", "answer",
              "region", "--categories", "answer=2", "--categories", "region=4", "--epsilon", "1",
              "--seed", "1", "-o", "nb.json")
    assert res.exit_code == 0, res.output
    q = load(work / "nb.json")["query"]
    assert q["n_classes"] == 2 and q["n_levels"] == [4] and q["columns"] == ["answer", "region"]
    res = run("infer", "nb.json", "--model", "naive-bayes", "--method", "naive", "--draws", "50")
    assert res.exit_code == 0, res.output
    assert "n_classes = 2, n_levels = [4] (from the release)" in res.output


@pytest.mark.parametrize("args,want", [
    (["d.csv", "--column", "a", "b", "c", "-o", "r.json"],
     ["d.csv", "--column", "a", "--column", "b", "--column", "c", "-o", "r.json"]),
    (["--column", "a", "b", "d.csv", "-o", "r.json"],
     ["--column", "a", "--column", "b", "-o", "r.json", "d.csv"]),
    (["d.csv", "--column=a", "b", "--bounds", "-5,5"],
     ["d.csv", "--column", "a", "--column", "b", "--bounds", "-5,5"]),
    (["d.csv", "--bounds", "-5,5", "--column", "a"], ["d.csv", "--bounds", "-5,5", "--column", "a"]),
])
def test_split_column_args(args, want):
    from privpost.cli.release import split_column_args

    assert split_column_args(args, {"--column", "--bounds", "-o"}) == want


def test_count_query_from_flags(work):
    res = run("release", "survey.csv", "--query", "count", "--column", "answer", "--epsilon", "1",
              "--seed", "1", "-o", "c.json")
    assert res.exit_code == 0, res.output
    q = load(work / "c.json")["query"]
    assert q["type"] == "sum" and q["bounds"] == [0, 1]
    res = run("release", "survey.csv", "--query", "count", "--column", "age", "--epsilon", "1",
              "-o", "c2.json")
    assert res.exit_code == 1 and "0/1" in res.output and "--query sum" in res.output
