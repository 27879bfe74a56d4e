"""tau-ARGUS files (client/sdc_client/tauargus.py): hierarchies, codelists, patterns."""

from __future__ import annotations

import io

import pytest
from sdc_client.tauargus import (
    TauArgusFormatError,
    format_hrc,
    format_pattern,
    parse_hrc,
    read_codelist,
    read_hrc,
    tau_status,
)

# NACE-like: two sections, one with two divisions, one division with two groups.
HRC = """\
A
@01
@@01.1
@@01.2
@02
B
@05
"""


def test_levels_become_children_under_the_total():
    assert parse_hrc(HRC) == {
        "Total": ["A", "B"],
        "A": ["01", "02"],
        "01": ["01.1", "01.2"],
        "B": ["05"],
    }


def test_other_total_and_level_marker_and_blank_lines():
    text = "\n  X \n**x1\n**x2\n\nY\n"
    assert parse_hrc(text, total="T", lead="**") == {"T": ["X", "Y"], "X": ["x1", "x2"]}


def test_round_trip():
    children = parse_hrc(HRC)
    assert format_hrc(children) == HRC
    assert parse_hrc(format_hrc(children, lead="+"), lead="+") == children


@pytest.mark.parametrize(
    "text, message",
    [
        ("A\n@@a1\n", "line 2: 'a1' is 3 levels deep but the code before it only 1"),
        ("A\n@a1\nB\n@a1\n", "line 4: 'a1' is listed twice"),
        ("Total\n", "line 1: 'Total' is listed twice"),
        ("A\n@\n", "line 2: a level marker without a code"),
        ("\n\n", "no codes in the hierarchy"),
    ],
)
def test_malformed_files_name_the_line(text, message):
    with pytest.raises(TauArgusFormatError, match=message):
        parse_hrc(text)


def test_read_from_a_latin1_file(tmp_path):
    path = tmp_path / "region.hrc"
    path.write_bytes("Nord\n@Bergen\n@Tromsø\n".encode("latin-1"))
    assert read_hrc(path) == {"Total": ["Nord"], "Nord": ["Bergen", "Tromsø"]}
    assert read_hrc(io.StringIO("Nord\n@Oslo\n")) == {"Total": ["Nord"], "Nord": ["Oslo"]}


def test_codelist_labels():
    text = '01,"Crop and animal production"\n02\n03,Fishing, aquaculture\n'
    assert read_codelist(io.StringIO(text)) == {
        "01": "Crop and animal production",
        "02": "02",
        "03": "Fishing",
    }
    with pytest.raises(TauArgusFormatError, match="line 2: '01' is listed twice"):
        read_codelist(io.StringIO("01\n01\n"))


def test_statuses_in_tau_argus_codes():
    assert [tau_status(s) for s in ("primary", "secondary", "published")] == ["U", "M", "S"]
    assert tau_status("published", empty=True) == "Z"
    assert tau_status("primary", empty=True) == "U"
    with pytest.raises(ValueError, match="unknown cell status 'safe'"):
        tau_status("safe")


def test_pattern_and_apriori_files():
    cells = [
        {"key": ["A", "Total"], "status": "primary", "value": 120.0},
        {"key": ["B", "Total"], "status": "secondary", "value": 80.5},
        {"key": ["Total", "Total"], "status": "published", "value": 200.5},
        {"key": ["C", "Total"], "status": "published", "value": 0},
    ]
    assert format_pattern(cells) == (
        "A;Total;120.0;U\nB;Total;80.5;M\nTotal;Total;200.5;S\nC;Total;0;Z\n"
    )
    assert format_pattern(cells, apriori=True) == (
        "A;Total;u\nB;Total;u\nTotal;Total;s\nC;Total;s\n"
    )
    assert format_pattern([{"key": ["A"], "status": "primary"}]) == "A;;U\n"


def test_a_tau_argus_hierarchy_drives_a_suppression(client):
    """The service's ``children`` form takes the parsed file as it is: a 2-level region
    hierarchy by a flat size class, with one dominated cell."""
    regions = parse_hrc("N\n@n1\n@n2\nS\n@s1\n@s2\n")
    leaves = ["n1", "n2", "s1", "s2"]
    cells = [
        {"key": [r, c], "contributions": [{"value": 50.0}, {"value": 40.0}, {"value": 30.0}]}
        for r in leaves
        for c in ("small", "large")
    ]
    cells[0]["contributions"] = [{"value": 900.0}, {"value": 5.0}]
    body = {
        "structure": {
            "dimensions": [
                {"name": "region", "children": regions},
                {"name": "size", "leaves": ["small", "large"]},
            ]
        },
        "rules": {"rules": [{"type": "p_percent", "p": 10}]},
        "cells": cells,
    }
    r = client.post("/v1/suppress", json=body)
    assert r.status_code == 200, r.text
    reply = r.json()
    status = {tuple(c["key"]): c["status"] for c in reply["cells"]}
    assert status[("n1", "small")] == "primary" and reply["safe"]
    lines = format_pattern(reply["cells"]).splitlines()
    # The reply carries every cell's value (n1,small: 900 + 5), written beside its code.
    assert "n1;small;905.0;U" in lines and sum(line.endswith(";M") for line in lines) >= 3
