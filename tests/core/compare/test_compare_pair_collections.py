"""compare_pair raises gc's youngest threshold while the pair runs and puts it back afterwards."""
import gc
import os

from msprobe.core.compare.pair import CompareOptions, compare_pair

from compare_samples import sample_dump


def test_young_threshold_is_raised_during_the_pair_and_restored(tmp_path):
    seen = []

    def entry_mapper(entry):  # called while the rows are matched, in the middle of the pair
        seen.append(gc.get_threshold())
        return entry

    before = gc.get_threshold()
    dump = sample_dump("pytorch_statistics_mix")
    options = CompareOptions(progress=False, is_print_compare_log=False, entry_mapper=entry_mapper)
    outcome = compare_pair(dump, dump, str(tmp_path), options)
    assert os.path.isfile(outcome.xlsx_path) and outcome.summary is not None
    assert seen and all(threshold[0] >= 100_000 and threshold[1:] == before[1:] for threshold in seen)
    assert gc.get_threshold() == before


def test_a_threshold_already_higher_is_left_alone(tmp_path):
    before = gc.get_threshold()
    gc.set_threshold(500_000, *before[1:])
    try:
        seen = []
        dump = sample_dump("pytorch_statistics_mix")
        options = CompareOptions(progress=False, is_print_compare_log=False,
                                 entry_mapper=lambda entry: seen.append(gc.get_threshold()) or entry)
        compare_pair(dump, dump, str(tmp_path), options)
        assert seen and all(threshold[0] == 500_000 for threshold in seen)
        assert gc.get_threshold()[0] == 500_000
    finally:
        gc.set_threshold(*before)
