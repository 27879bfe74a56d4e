"""The ``sdc`` command line (client/sdc_client/cli.py): in process and against a server."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
from sdc_client.cli import main

from service.app import create_app
from service.config import Settings
from tests.servers import ROOT, served
from tests.test_client import EXPECTED_STATUS, check_protected_table, turnover

RULES = json.dumps([{"type": "p_percent", "p": 20}])
ARGS = ["--dimensions", "size,activity", "--value", "turnover", "--holding", "ent"]


@pytest.fixture(scope="module")
def url():
    app = create_app(Settings())
    with served(app, app.state.settings) as (_, port):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "turnover.csv"
    turnover().to_csv(path, index=False)
    return path


def test_suppress_in_process_and_over_http_write_the_same_csv(data, url, tmp_path, capsys):
    local, remote = tmp_path / "local.csv", tmp_path / "remote.csv"
    assert main(["suppress", str(data), *ARGS, "--rules", RULES, "-o", str(local)]) == 0
    assert "safe: 1 primary, 3 secondary of 16 cells" in capsys.readouterr().err
    assert (
        main(["suppress", str(data), *ARGS, "--rules", RULES, "-o", str(remote), "--url", url]) == 0
    )
    assert local.read_text() == remote.read_text()
    check_protected_table(pd.read_csv(local))


def test_parquet_input_and_codes_read_as_text(tmp_path, url):
    frame = turnover()
    frame["size"] = frame["size"].map({"A": "01", "B": "02", "C": "10"})
    frame.to_parquet(tmp_path / "t.parquet")
    frame.to_csv(tmp_path / "t.csv", index=False)
    out = {}
    for name in ("t.parquet", "t.csv"):
        target = tmp_path / f"{name}.out.csv"
        assert (
            main(["suppress", str(tmp_path / name), *ARGS, "--rules", RULES, "-o", str(target)])
            == 0
        )
        out[name] = target.read_text()
    assert out["t.parquet"] == out["t.csv"]
    assert "\n01,I,105.0,primary," in out["t.csv"]  # "01" kept, not read as the number 1


def test_audit_exit_status_follows_the_verdict(tmp_path, capsys):
    frame = turnover()
    keys = list(zip(frame["size"], frame["activity"], strict=True))
    frame["cross"] = ["x" if k in EXPECTED_STATUS else "" for k in keys]
    frame.to_csv(tmp_path / "p.csv", index=False)
    out = tmp_path / "audit.csv"
    argv = ["audit", str(tmp_path / "p.csv"), *ARGS, "--rules", RULES, "--suppressed", "cross"]
    assert main([*argv, "-o", str(out)]) == 0
    assert "verdict: safe" in capsys.readouterr().err
    check_protected_table(pd.read_csv(out))
    frame["cross"] = ["x" if k == ("A", "I") else "" for k in keys]
    frame.to_csv(tmp_path / "p.csv", index=False)
    assert main([*argv, "-o", str(out)]) == 1
    assert "verdict: unsafe" in capsys.readouterr().err


def test_sensitivity_and_hierarchy_file(tmp_path, url):
    out = tmp_path / "s.csv"
    args = ["sensitivity", str(tmp_path / "t.csv"), *ARGS, "--rules", RULES, "-o", str(out)]
    turnover().to_csv(tmp_path / "t.csv", index=False)
    assert main([*args, "--url", url]) == 0
    result = pd.read_csv(out)
    assert result["sensitive"].tolist() == [True] + [False] * 8
    assert result.loc[0, ["total", "count", "upper_protection"]].tolist() == [105.0, 2.0, 20.0]
    # A hierarchy from a tau-ARGUS file: A and B under AB.
    (tmp_path / "size.hrc").write_text("AB\n@A\n@B\nC\n")
    out = tmp_path / "h.csv"
    argv = ["suppress", str(tmp_path / "t.csv"), *ARGS, "--rules", RULES, "-o", str(out)]
    assert main([*argv, "--hierarchy", "size=" + str(tmp_path / "size.hrc")]) == 0
    by_key = pd.read_csv(out).set_index(["size", "activity"])
    assert len(by_key) == 5 * 4
    assert by_key.loc[("AB", "I"), "value"] == 205.0
    assert by_key.loc[("A", "I"), "status"] == "primary"


def test_errors_name_field_and_cell_with_status_2(tmp_path, url, capsys):
    frame = turnover()
    frame.loc[5, "turnover"] = -3
    frame.to_csv(tmp_path / "neg.csv", index=False)
    argv = ["sensitivity", str(tmp_path / "neg.csv"), *ARGS, "--rules", RULES]
    for extra in ([], ["--url", url]):
        assert main([*argv, *extra]) == 2
        err = capsys.readouterr().err
        assert "422 invalid_request" in err
        assert "cell 1 ['A', 'II'], field 'contributions.value': negative contribution" in err


def test_bad_rules_json_is_a_usage_error(data):
    with pytest.raises(SystemExit) as info:
        main(["suppress", str(data), *ARGS, "--rules", "{not json"])
    assert info.value.code == 2


def test_python_dash_m_writes_clean_csv_to_stdout(data):
    """The solver library prints a banner from C; stdout must hold the CSV only."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "client"), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-m", "sdc_client", "suppress", str(data), *ARGS, "--rules", RULES],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("size,activity,value,status,")
    assert len(lines) == 17
    assert "safe: 1 primary, 3 secondary" in done.stderr
