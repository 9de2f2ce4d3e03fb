import os, sys, torch
from rlscale.tasks import make_task
g = torch.Generator(device="cuda").manual_seed(7)
def run(seed):
    t = make_task("Rlscale-Ant", num_envs=256, device="cuda", seed=seed)
    obs = [t.reset()[0]["policy"].clone()]
    gen = torch.Generator(device="cuda").manual_seed(7)
    for _ in range(20):
        a = torch.rand((256, t.num_actions), generator=gen, device="cuda") * 2 - 1
        obs.append(t.step(a)[0]["policy"].clone())
    return obs
a, b, c = run(0), run(0), run(1)
print("XLA_FLAGS", os.environ.get("XLA_FLAGS"))
print("same seed max|d| per step:", [f"{(x-y).abs().max().item():.1e}" for x, y in zip(a, b)][:21])
print("other seed max|d| per step:", [f"{(x-y).abs().max().item():.1e}" for x, y in zip(a, c)][:6])
