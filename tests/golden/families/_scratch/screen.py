import sys, os, copy, json
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import make_family_goldens as M

def screen(seed, gain, levels, full=False):
    spec = copy.deepcopy(dict(M.CASES)["glm4moe"])
    spec["seed"] = seed
    spec["moe"]["router_gain"] = gain
    spec["moe"]["bias_levels"] = levels
    hf = M.cast_tensors(M.make_hf_tensors(spec), "F32")
    cfg = M.hf_config(spec, "F32")
    t = {k: v.astype(np.float64) for k, v in hf.items()}
    _, _, _, _, _, specials, _ = M.vocab_for(spec)
    allowed = np.array([i for i in range(M.VOCAB) if i not in specials])
    prng = np.random.default_rng(spec["seed"] * 1000 + 7)
    prompts = {name: [int(i) for i in prng.choice(allowed, size=n)] for name, n in M.PROMPT_LENS}
    records = {}
    greedy = []
    for name, ids in prompts.items():
        if full:
            toks, gaps, _ = M.greedy_reference(cfg, t, ids, M.N_GREEDY)
            greedy.append((sum(g > 0.5 for g in gaps), round(min(gaps), 3)))
            seq = ids + toks[:-1]
        else:
            seq = ids
        records[name] = []
        M.reference_logits(cfg, t, seq, record=records[name])
    r = M.routing_summary(spec, records)
    r["greedy"] = greedy
    return r

if __name__ == "__main__":
    gain = float(sys.argv[1]); lv = json.loads(sys.argv[2]); s0, s1 = int(sys.argv[3]), int(sys.argv[4])
    full = len(sys.argv) > 5
    res = []
    for seed in range(s0, s1):
        r = screen(seed, gain, lv, full)
        g = r["groups"]
        ok_use = all(min(u) > 0 for u in r["expert_usage"].values())
        res.append((r["min_routing_gap"], seed, g["min_expert_gap"], g["min_group_gap"], g["min_kth_selection_value"], ok_use,
                    g["decisions_changed_by_group_limit"], g["best_expert_in_dropped_group"], g["decisions_changed_by_correction_bias"]))
    res.sort(reverse=True)
    print(len(res), sum(1 for x in res if x[5]))
    res = [x for x in res if x[5]]
    for x in res[:8]:
        print(x)

def usage_report(seed, gain, levels):
    r = screen(seed, gain, levels)
    print(seed, r["expert_usage"], r["groups"]["group_usage"])
