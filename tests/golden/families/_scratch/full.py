import sys, json
sys.path.insert(0, '_scratch')
import screen as S
gain = float(sys.argv[1]); lv = json.loads(sys.argv[2]); s0, s1 = int(sys.argv[3]), int(sys.argv[4])
pre = []
for seed in range(s0, s1):
    r = S.screen(seed, gain, lv, False)
    if all(min(u) > 0 for u in r["expert_usage"].values()) and r["min_routing_gap"] > float(sys.argv[5]):
        pre.append(seed)
print("prefiltered", len(pre), flush=True)
res = []
for seed in pre:
    r = S.screen(seed, gain, lv, True)
    g = r["groups"]
    res.append((r["min_routing_gap"], seed, g["min_expert_gap"], g["min_group_gap"], g["min_kth_selection_value"],
                all(min(u) > 0 for u in r["expert_usage"].values()),
                g["decisions_changed_by_group_limit"], g["best_expert_in_dropped_group"], g["decisions_changed_by_correction_bias"], r["greedy"]))
res.sort(reverse=True)
for x in res[:12]: print(x)
