"""Write a large ``lazyconv assign`` input document (for timing the whole command).

Usage::

    python bench/assignment_input.py 1000 100 /tmp/big.json
    /usr/bin/time -f "%e s" lazyconv assign /tmp/big.json --strategy min_traffic > /dev/null

T tasks in T/20 subtopologies; every fifth task stateless, the others stateful with one
changelog partition and one standby on a random other client; partitions replicated on 2 of 3
racks; C clients over 3 racks; a shuffled round-robin current assignment; seeded.
"""

from __future__ import annotations

import json
import random
import sys


def document(tasks: int, clients: int, seed: int = 5) -> dict:
    rng = random.Random(seed)
    racks = ["az1", "az2", "az3"]
    client_list = [{"id": f"{n:08x}-0000-4000-8000-{n:012x}", "rack": racks[n % 3], "threads": 2} for n in range(clients)]
    task_list = []
    for i in range(tasks):
        s, p = i // 20, i % 20
        stateful = i % 5 != 0
        changelog = [{"topic": f"store{s}-changelog", "partition": p, "replica_racks": rng.sample(racks, 2)}]
        task_list.append(
            {
                "id": f"{s}_{p}",
                "subtopology": s,
                "stateful": stateful,
                "partitions": [{"topic": f"in{s}", "partition": p, "replica_racks": rng.sample(racks, 2)}],
                "changelog_partitions": changelog if stateful else [],
            }
        )
    current = {c["id"]: {"active": [], "standby": []} for c in client_list}
    order = list(range(tasks))
    rng.shuffle(order)
    for k, i in enumerate(order):
        current[client_list[k % clients]["id"]]["active"].append(task_list[i]["id"])
        if task_list[i]["stateful"]:
            other = client_list[(k + 1 + rng.randrange(clients - 1)) % clients]["id"]
            current[other]["standby"].append(task_list[i]["id"])
    return {
        "clients": client_list,
        "tasks": task_list,
        "current": current,
        "num_standby_replicas": 1,
        "traffic_cost": None,
        "non_overlap_cost": None,
    }


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__)
        return 2
    tasks, clients, path = int(argv[0]), int(argv[1]), argv[2]
    with open(path, "w", encoding="utf-8") as out:
        json.dump(document(tasks, clients), out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
