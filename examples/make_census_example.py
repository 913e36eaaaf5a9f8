"""Writes examples/census_county_sex.json and .csv: a small synthetic census-style noisy table.

Four counties × two cells (female, male) of 1,200 synthetic persons; each cell count gets
discrete Gaussian noise of variance σ² = 1/(2ρ) with ρ = 0.5 (σ² = 1), as the 2020 Census
noisy measurement files do (layout: docs/interop.md, privpost.releases.census). The true counts are in
TRUE below (a simulation: the analyst never has them). Run from the repository root:

    python examples/make_census_example.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from privpost.mechanisms import DiscreteGaussian

HERE = Path(__file__).resolve().parent
COUNTIES = ["001", "003", "005", "007"]
CELLS = ["female", "male"]
TRUE = [[312, 298], [151, 139], [88, 92], [61, 59]]       # persons per county and cell
RHO = 0.5


def main(out_dir: Path = HERE, seed: int = 2020) -> dict:
    mech = DiscreteGaussian(rho=RHO).calibrate(1.0, neighbours="add-remove")  # σ² = 1/(2ρ)
    noisy = mech.sample(np.asarray(TRUE, dtype=float).ravel(), seed=seed).reshape(len(COUNTIES),
                                                                                  len(CELLS))
    variance = mech.scale ** 2
    doc = {
        "schema": "privpost.census-nmf/1",
        "description": "synthetic county x sex table, 1200 persons, rho = 0.5 per query",
        "n": int(np.sum(TRUE)),
        "neighbours": "add-remove",
        "queries": [{
            "name": "sex", "geolevel": "County", "cells": CELLS, "variance": variance,
            "measurements": [{"geocode": g, "values": [int(v) for v in row]}
                             for g, row in zip(COUNTIES, noisy)],
        }],
    }
    (out_dir / "census_county_sex.json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = ["geolevel,geocode,query,cell,variance,value"]
    lines += [f"County,{g},sex,{c},{variance!r},{int(v)}"
              for g, row in zip(COUNTIES, noisy) for c, v in zip(CELLS, row)]
    (out_dir / "census_county_sex.csv").write_text("\n".join(lines) + "\n")
    return doc


if __name__ == "__main__":
    main()
