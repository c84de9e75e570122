"""Export your own classifier's scores in calbench's npz schema (e.g. for ham10000, fungi).

The papers' HAM10000 and Danish Fungi models are not public; Ho (2023) used a DenseNet-121
(HAM10000, 7 classes) and a network on Danish Fungi remapped to 6 edibility classes. Train
or take your own model, then write its logits on a calibration and a test split:

    python scripts/export_scores.py --help

``export_npz`` is the part to call from your own code:

    from scripts.export_scores import export_npz
    export_npz("data/ham10000.npz", logits_cal, y_cal, logits_test, y_test, class_names)

For Fungi, map species to the 6 edibility classes first with a CSV you supply
(``species,edibility_class``): ``--species-map FILE`` relabels species-level labels (and sums
species probabilities into classes when you pass probabilities instead of logits).
Then: ``calbench run dataset=fungi`` (or ``dataset=npz dataset.path=FILE``).
"""

from __future__ import annotations

import argparse
import csv

import numpy as np


def export_npz(path, logits_cal, y_cal, logits_test, y_test, class_names=None) -> None:
    arrays = dict(
        logits_cal=np.asarray(logits_cal, dtype=np.float64),
        y_cal=np.asarray(y_cal),
        logits_test=np.asarray(logits_test, dtype=np.float64),
        y_test=np.asarray(y_test),
    )
    if class_names is not None:
        arrays["class_names"] = np.array(class_names)
    np.savez(path, **arrays)


def species_to_classes(probs, labels, species_map_csv):
    """Sum species probabilities into edibility classes; relabel species labels."""
    with open(species_map_csv, newline="") as f:
        mapping = {int(row["species"]): int(row["edibility_class"]) for row in csv.DictReader(f)}
    target = np.array([mapping[s] for s in range(probs.shape[1])])
    n_classes = target.max() + 1
    summed = np.zeros((len(probs), n_classes))
    np.add.at(summed.T, target, probs.T)
    return summed, target[np.asarray(labels)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scores", help="an npz with scores_cal, y_cal, scores_test, y_test")
    parser.add_argument("out")
    parser.add_argument(
        "--probabilities", action="store_true", help="the scores are probabilities, not logits"
    )
    parser.add_argument("--species-map", help="CSV species,edibility_class (Fungi)")
    args = parser.parse_args()
    with np.load(args.scores) as f:
        parts = [f["scores_cal"], f["y_cal"], f["scores_test"], f["y_test"]]
    if args.species_map:
        if not args.probabilities:
            raise SystemExit("--species-map needs --probabilities (species probabilities sum).")
        parts[0], parts[1] = species_to_classes(parts[0], parts[1], args.species_map)
        parts[2], parts[3] = species_to_classes(parts[2], parts[3], args.species_map)
    if args.probabilities:
        parts[0], parts[2] = (
            np.log(np.clip(parts[0], 2.2e-308, None)),
            np.log(np.clip(parts[2], 2.2e-308, None)),
        )
    export_npz(args.out, *parts)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
