#!/usr/bin/env python3
"""Checks how scripts/convergence_claims.py judges the papers' claims from cells: the verdict rule
against twice the standard error, which cells count as confounded (too few iterations, a borrowed
rate), that a headline reads only the cells without confounds, that a confounded verdict is said to
be replaced or to stand by the clean cell at the same point, that accuracy margins skip perplexity
cells, and that the schedule's effect pairs a -sched cell with its twin. Usage:
convergence_claims_test.py SOURCE_DIR"""

import importlib.util
import pathlib
import sys
import unittest

SOURCE = pathlib.Path(sys.argv.pop(1) if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2])
spec = importlib.util.spec_from_file_location("convergence_study", SOURCE / "scripts" / "convergence_study.py")
study = importlib.util.module_from_spec(spec)
spec.loader.exec_module(study)
claims = sys.modules["convergence_claims"]  # loaded by the study from beside itself


def spread(mean, std=0.002, n=3):
    return {"mean": mean, "std": std, "min": mean - std, "max": mean + std, "n": n}


def measured(cell, iterations, **means):
    return claims.Measured(cell, iterations, {k.replace("_", "-"): v for k, v in means.items()}, {})


P4 = study.Cell("cnn", 4, 0.01, 3, ["dense", "topk-gtopk-rd"])
P8_SHORT = study.Cell("cnn", 8, 0.01, 3, ["dense", "topk-gtopk-rd"])
P8_EQUAL = study.Cell("cnn", 8, 0.01, 6, ["dense", "topk-gtopk-rd"])
P8_SCHED = study.Cell("cnn", 8, 0.01, 6, ["dense", "topk-gtopk-rd"], schedule=True)
P32_BORROWED = study.Cell("cnn", 32, 0.01, 24, ["dense", "topk-gtopk-rd"], tuned_in=P8_EQUAL.name)
MAIN = claims.GTOPK_CLAIMS[0]  # gTop-k within 0.5 points of dense


class Verdict(unittest.TestCase):
    def test_the_difference_is_judged_against_twice_its_standard_error(self):
        a, b = spread(0.90, 0.01), spread(0.88, 0.01)  # 2 se = 2 * sqrt(2 * 0.01^2 / 3) = 0.0163
        self.assertEqual(claims.verdict(a, b)[0], "holds")
        self.assertEqual(claims.verdict(b, a)[0], "does not hold")
        self.assertEqual(claims.verdict(spread(0.89, 0.01), b)[0], "cannot tell")
        self.assertAlmostEqual(claims.verdict(a, b)[2], 2 * (2 * 0.01 ** 2 / 3) ** 0.5)

    def test_a_margin_moves_the_bar(self):
        a, b = spread(0.899, 0.001), spread(0.902, 0.001)
        self.assertEqual(claims.verdict(a, b)[0], "does not hold")
        self.assertEqual(claims.verdict(a, b, 0.005)[0], "holds")

    def test_one_seed_is_not_a_measurement(self):
        self.assertEqual(claims.verdict(spread(0.9, n=1), spread(0.8))[0], "cannot tell (not measured)")


class Protocols(unittest.TestCase):
    def setUp(self):
        self.cells = [measured(P4, 1290, dense=spread(0.90), topk_gtopk_rd=spread(0.899)),
                      measured(P8_SHORT, 645, dense=spread(0.90), topk_gtopk_rd=spread(0.87)),
                      measured(P8_EQUAL, 1290, dense=spread(0.91), topk_gtopk_rd=spread(0.909))]
        self.reference = claims.reference_iterations(self.cells)

    def test_the_p4_cell_sets_the_run_length(self):
        self.assertEqual(self.reference, {("cnn", False): 1290})

    def test_fewer_iterations_and_borrowed_rates_are_confounds(self):
        self.assertEqual(claims.confounds(self.cells[0], "topk-gtopk-rd", "dense", self.reference), [])
        self.assertIn("fixed epochs", claims.confounds(self.cells[1], "topk-gtopk-rd", "dense", self.reference)[0])
        self.assertEqual(claims.confounds(self.cells[2], "topk-gtopk-rd", "dense", self.reference), [])
        borrowed = measured(P32_BORROWED, 1290, dense=spread(0.9), topk_gtopk_rd=spread(0.9))
        found = claims.confounds(borrowed, "topk-gtopk-rd", "dense", self.reference)
        self.assertEqual(len(found), 1)
        self.assertIn(P8_EQUAL.name, found[0])

    def test_the_headline_reads_only_cells_without_confounds(self):
        rows = claims.rows_for(MAIN, self.cells, self.reference)
        self.assertEqual(len(rows), 3)
        text = claims.headline(rows)
        self.assertIn("**holds** at cnn P = 4", text)
        self.assertIn("cnn P = 8", text)
        self.assertNotIn("-3.00", text)  # the 645-iteration cell's gap is not in the headline

    def test_a_clean_cell_replaces_the_confounded_verdict_at_its_point(self):
        notes = claims.replaced(claims.rows_for(MAIN, self.cells, self.reference))
        self.assertEqual(len(notes), 1)
        self.assertIn(P8_SHORT.name, notes[0])
        self.assertIn("**does not hold**", notes[0])
        self.assertIn("replaced by **holds**", notes[0])
        self.assertIn("1,290 iterations", notes[0])

    def test_a_confirmed_verdict_is_said_to_stand(self):
        self.cells[2] = measured(P8_EQUAL, 1290, dense=spread(0.91), topk_gtopk_rd=spread(0.88))
        notes = claims.replaced(claims.rows_for(MAIN, self.cells, self.reference))
        self.assertIn("still **does not hold**", notes[0])

    def test_without_a_clean_cell_the_headline_says_so(self):
        rows = claims.rows_for(MAIN, self.cells[1:2], self.reference)
        self.assertIn("No cell without confounds", claims.headline(rows))

    def test_a_schedule_cell_has_its_own_headline_and_is_not_a_twin_for_replacement(self):
        self.cells.append(measured(P8_SCHED, 1290, dense=spread(0.915), topk_gtopk_rd=spread(0.90)))
        rows = claims.rows_for(MAIN, self.cells, self.reference)
        text = claims.headline(rows)
        self.assertIn("With the authors' schedule: **does not hold** at cnn P = 8, d 0.01, authors' schedule", text)
        self.assertEqual(len(claims.replaced(rows)), 1)

    def test_the_schedule_effect_pairs_each_arm_with_its_twin(self):
        self.cells.append(measured(P8_SCHED, 1290, dense=spread(0.93), topk_gtopk_rd=spread(0.909)))
        lines = claims.schedule_section(self.cells)
        rows = [line for line in lines if line.startswith(f"| {P8_SCHED.name} |")]
        self.assertEqual(len(rows), 2)
        self.assertTrue(rows[0].endswith("| holds |"))        # dense gains 2 points
        self.assertTrue(rows[1].endswith("| cannot tell |"))  # gTop-k the same

    def test_accuracy_margins_skip_perplexity_cells(self):
        lm = measured(study.Cell("lstm", 4, 0.01, 20, ["dense", "topk-gtopk-rd"], task=study.LicenseTextLm()), 540,
                      dense=spread(-30.0, 1.0), topk_gtopk_rd=spread(-32.0, 1.0))
        self.assertEqual(claims.rows_for(MAIN, [lm], {}), [])
        rows = claims.rows_for(claims.GTOPK_CLAIMS[1][:3] + (0.0,), [lm], {})
        self.assertEqual(rows, [])  # topk-allgather is not measured there
        lm.means["topk-allgather"] = spread(-40.0, 1.0)
        rows = claims.rows_for(claims.GTOPK_CLAIMS[1], [lm], {})
        self.assertEqual(rows[0][1], "holds")  # perplexity 32 against 40
        self.assertIn("perplexity -8.0", claims.show_difference(lm, rows[0][2], rows[0][3]))

    def test_an_unmeasured_claim_names_its_arms(self):
        section = claims.claim_section(claims.RTOPK_CLAIMS[0], self.cells, self.reference)
        self.assertIn("Not measured: no cell runs both rtopk1.5-allgather and topk-allgather.", section)


if __name__ == "__main__":
    unittest.main()
