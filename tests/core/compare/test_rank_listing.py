"""rank_pairs.list_rank_dirs / pair_rank_dirs: the pairs of a job whose ranks are listed by several machines (Ray on
node-local disks) are those of the whole job listed by one; a machine without the roots lists nothing."""
import os
import shutil

from msprobe.core.compare.rank_pairs import find_rank_pairs, list_rank_dirs, pair_rank_dirs


def _ranks(root, steps, ranks, sides=("npu", "bench")):
    for side in sides:
        for step in steps:
            for rank in ranks:
                folder = os.path.join(root, side, f"step{step}", f"rank{rank}")
                os.makedirs(folder, exist_ok=True)
                with open(os.path.join(folder, "dump.json"), "w") as handle:
                    handle.write('{"task": "statistics", "data": {}}')


def test_listings_of_two_disks_under_one_path_pair_like_the_whole_job(tmp_path):
    whole, disk = str(tmp_path / "whole"), str(tmp_path / "disk")
    _ranks(whole, [0, 1], [0, 1, 2, 10])
    expected = [(tag, n.replace(whole, disk), b.replace(whole, disk))
                for tag, n, b in find_rank_pairs(os.path.join(whole, "npu"), os.path.join(whole, "bench"))]
    roots = (os.path.join(disk, "npu"), os.path.join(disk, "bench"))
    listings = []
    for ranks, steps in (([0, 10], [0, 1]), ([1, 2], [0]), ([1, 2], [1])):  # one path, three machines' disks
        _ranks(disk, steps, ranks)
        listings.append(list_rank_dirs(*roots))
        shutil.rmtree(disk)
    listings.append(list_rank_dirs(*roots))  # a machine without the roots
    assert listings[-1]["files"] == set()
    pairs = pair_rank_dirs(*roots, listings)
    assert pairs == expected and len(pairs) == 8
    assert [tag for tag, _, _ in pairs[:4]] == ["_step0_rank0-rank0", "_step0_rank1-rank1", "_step0_rank10-rank10",
                                                 "_step0_rank2-rank2"]  # the order of sorted folder names
    assert set().union(*(listing["files"] for listing in listings)) == {p for _, n, b in pairs for p in (n, b)}


def test_a_rank_whose_npu_and_bench_dumps_are_on_different_machines_is_still_a_pair(tmp_path):
    disk = str(tmp_path / "disk")
    roots = (os.path.join(disk, "npu"), os.path.join(disk, "bench"))
    _ranks(disk, [0], [0, 1])
    first = list_rank_dirs(*roots)
    shutil.rmtree(disk)
    _ranks(disk, [0], [2], sides=("npu",))
    second = list_rank_dirs(*roots)
    shutil.rmtree(disk)
    _ranks(disk, [0], [2], sides=("bench",))
    third = list_rank_dirs(*roots)
    pairs = pair_rank_dirs(*roots, [first, second, third])
    assert [tag for tag, _, _ in pairs] == ["_step0_rank0-rank0", "_step0_rank1-rank1", "_step0_rank2-rank2"]
    npu2, bench2 = pairs[2][1:]
    # no machine holds both: the Ray engine names this pair instead of comparing it
    assert not any(npu2 in listing["files"] and bench2 in listing["files"] for listing in (first, second, third))
