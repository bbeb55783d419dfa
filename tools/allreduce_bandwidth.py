"""allreduce_bandwidth.py: how fast NCCL averages a tensor over this host's GPUs.

Chapter 15 predicts the cost of averaging the gradients from NCCL's bus
bandwidth: an all-reduce of S bytes over N GPUs moves 2(N-1)/N * S bytes in
and out of each GPU (a ring's reduce-scatter and all-gather), so its time is
that over the bus bandwidth. This measures it, with PyTorch's NCCL, one
process a GPU:

    torchrun --standalone --nproc-per-node 2 tools/allreduce_bandwidth.py

and prints, for bf16 tensors of a few sizes (GPT-2 124M's gradients are
124.5M values, 249 MB), the median time of 20 all-reduces after 5 and the
bus bandwidth it gives.
"""
import os
import statistics

import torch
import torch.distributed as dist


def time_allreduce(x, warmup=5, reps=20):
    times = []
    for i in range(warmup + reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        dist.barrier()
        start.record()
        dist.all_reduce(x, op=dist.ReduceOp.AVG)
        end.record()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group("nccl")
    for values in (7_077_888, 38_633_472, 124_475_904, 536_870_912):
        x = torch.ones(values, dtype=torch.bfloat16, device="cuda")
        ms = time_allreduce(x)
        size = values * 2
        bus = 2 * (world - 1) / world * size / (ms / 1e3) / 1e9
        if rank == 0:
            print(f"allreduce: {world} GPUs, {values} bf16 values ({size / 1e6:.1f} MB): "
                  f"{ms:.3f} ms median of 20, bus bandwidth {bus:.1f} GB/s")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
