"""The charts of bench.md (matplotlib, imported only here): bench_reductions.png and bench_nn.png, the memory-bound
kernels' GB/s at l1, l2 and dram with the read roof of each level (softmax and xent: half the copy roof, the
bytes read of a copy); bench_dense.png, the dense kernels' GFLOP/s
from 64 to 1024 with the FMA roofs and the peers; bench_threads.png, the dense kernels' GFLOP/s at 1024³ against
the thread count, with linear scaling and the best f32 FMA roof times the threads. Colour by arithmetic (mode), marker by
ISA; `__ref` left out."""

import os
import tempfile

from .markdown import LEVELS, size_key
from .results import Results, is_peer, peer_label
from .roofs import Roofs
from .threads import SUITES as THREAD_SUITES, thread_counts

MODE_COLOURS = {"f32": "tab:blue", "f16_f32acc": "tab:green", "f16": "tab:orange", "bf16_f32acc": "tab:purple",
                "fp8_f32acc": "tab:red", "mxfp8_f32acc": "tab:brown"}
# One marker per ISA path but ref (op_table_test checks them against `halfmap info --json`'s "isa_paths"): the
# bf16 paths a diamond, the fp16 ones a triangle, on both architectures.
ISA_MARKERS = {"avx2": "s", "avx512": "o", "avx512bf16": "D", "avx512fp16": "^", "neon": "s", "neonfp16": "^",
               "neonfhm": "v", "neonbf16": "D", "sve": "o"}
PEER_COLOURS = {"openblas": "tab:brown", "onednn": "tab:red", "xnnpack": "tab:pink", "eigen": "tab:olive"}
DTYPE_MARKERS = {"f32": "x", "f16": "+", "bf16": "*"}


def style(results, kernel):
    """Line style of a kernel in the charts: colour by arithmetic (mode), marker by ISA, avx2 and neon dashed;
    peers dotted, coloured by library, marker by storage type."""
    if is_peer(kernel):
        lib = peer_label(kernel).split("_", 1)[0]  # onednn_avx2_f32: onednn
        return {"color": PEER_COLOURS.get(lib, "tab:gray"), "marker": DTYPE_MARKERS.get(results.storage(kernel), "x"),
                "ls": ":", "label": peer_label(kernel) + " (peer)", "markersize": 9}
    facts = results.facts(kernel)
    return {"color": MODE_COLOURS.get(facts.mode, "tab:gray"), "marker": ISA_MARKERS.get(facts.isa, "o"),
            "ls": "--" if facts.isa in ("avx2", "neon") else "-", "label": f"{facts.mode} {facts.isa}"}


def shown(results, kernel, op):
    """Kernels drawn in op's panel: its own non-ref kernels and the peers of its suite."""
    facts = results.facts(kernel)
    return is_peer(kernel) or (facts.op == op and facts.isa != "ref")


class Charts:
    """Draws into `directory`; written = [(file name, title)]."""

    def __init__(self, data, info, directory):
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter

        self.plt, self.directory, self.written = plt, directory, []
        self.plain = FuncFormatter(lambda v, _: f"{v:g}")
        context = data.get("context", {}) or {}
        self.results = Results(data.get("benchmarks", []) or [], info)
        self.roofs = Roofs(context, self.results)

    def save(self, fig, name, title):
        path = os.path.join(self.directory, name)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".png", dir=self.directory)
        os.close(fd)
        try:
            fig.savefig(tmp, dpi=110, bbox_inches="tight")
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        finally:
            self.plt.close(fig)
        self.written.append((name, title))

    @staticmethod
    def legend(fig, axes, **where):
        handles = {}
        for ax in axes.flat:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                handles.setdefault(lab, h)
        if handles:
            fig.legend(handles.values(), handles.keys(), fontsize=8, **where)

    def memory_panel(self, ax, op, suite):
        results, xs = self.results, list(range(len(LEVELS)))
        # softmax and xent write as many bytes as they read: the bytes read a copy allows are half the copy roof.
        copies = op in results.rules.copy_ops
        levels = self.roofs.copy if copies else self.roofs.read
        roof = [(x, levels[lv] / (2 if copies else 1)) for x, lv in zip(xs, LEVELS) if levels.get(lv)]
        if roof:
            ax.plot(*zip(*[(x, r / 1e9) for x, r in roof]), color="k" if not copies else "0.35", ls="--", lw=2.2,
                    marker="_", markersize=18, label="copy roof, bytes read (half)" if copies else "read roof")
        for k in results.kernels.get(suite, []):
            if not shown(results, k, op):
                continue
            pts = [(x, results.value(suite, k, lv, "bytes_per_second")) for x, lv in zip(xs, LEVELS)]
            pts = [(x, v / 1e9) for x, v in pts if v]
            if pts:
                ax.plot(*zip(*pts), **style(results, k))
        ax.set_title(op)
        ax.set_xticks(xs, list(LEVELS))
        ax.set_xlim(-0.2, len(LEVELS) - 0.8)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(self.plain)
        ax.yaxis.set_minor_formatter(self.plain)
        ax.tick_params(axis="y", which="both", labelsize=8)
        ax.set_ylabel("GB/s read (log)")
        ax.grid(True, which="both", alpha=0.3)

    def memory_chart(self, ops, name, title):
        panels = [(op, self.results.ops.suite_of(op)) for op in ops]
        panels = [(op, suite) for op, suite in panels
                  if any(shown(self.results, k, op) for k in self.results.kernels.get(suite, []))]
        if not panels:
            return
        cols = 2
        rows = (len(panels) + cols - 1) // cols
        fig, axes = self.plt.subplots(rows, cols, figsize=(13, 4.2 * rows), squeeze=False)
        for ax, (op, suite) in zip(axes.flat, panels):
            self.memory_panel(ax, op, suite)
        for ax in list(axes.flat)[len(panels):]:
            ax.axis("off")
        self.legend(fig, axes, loc="center left", bbox_to_anchor=(1.0, 0.5))
        fig.suptitle(f"{title}: GB/s read at each size level, single core, with the read roof (softmax, xent: half "
                     f"the copy roof); colour: arithmetic, "
                     f"marker: ISA; `__ref` left out")
        fig.tight_layout()
        self.save(fig, name, title)

    def fma_lines(self):
        """[([isa, ...], roof)], fastest first; roofs within 3 % of each other share one line and label (avx2 and
        avx512 on Zen 4)."""
        lines = []
        for isa, roof in sorted(self.roofs.fma.items(), key=lambda x: -x[1]):
            if lines and abs(lines[-1][1] - roof) < 0.03 * roof:
                lines[-1][0].append(isa)
            else:
                lines.append(([isa], roof))
        return lines

    def dense_panel(self, ax, op, lines):
        results = self.results
        sizes = [s for s in sorted(results.args.get(op, []), key=size_key) if str(s).isdigit()]
        for isas, roof in lines:
            ax.axhline(roof / 1e9, color="k", lw=1.2, ls="--", alpha=0.6)
            ax.text(1.0, roof / 1e9, " fma " + ", ".join(isas), transform=ax.get_yaxis_transform(),
                    va="center", fontsize=8)
        for k in results.kernels.get(op, []):
            if not shown(results, k, op):
                continue
            pts = [(int(s), results.value(op, k, s, "flops_per_second")) for s in sizes]
            pts = [(s, v / 1e9) for s, v in pts if v]
            if pts:
                ax.plot(*zip(*pts), **style(results, k))
        ax.set_xscale("log", base=2)
        if sizes:
            ax.set_xticks([int(s) for s in sizes], sizes)
            ax.minorticks_off()
        ax.set_xlabel("M = N = K")
        ax.set_ylabel("GFLOP/s")
        ax.set_ylim(bottom=0)
        ax.set_title(op)
        ax.grid(True, alpha=0.3)

    def dense_chart(self):
        panels = [op for op in self.results.ops.dense if any(shown(self.results, k, op) for k in self.results.kernels.get(op, []))]
        if not panels:
            return
        lines = self.fma_lines()
        fig, axes = self.plt.subplots(1, len(panels), figsize=(7 * len(panels) + 1, 5.5), squeeze=False)
        for ax, op in zip(axes.flat, panels):
            self.dense_panel(ax, op, lines)
        self.legend(fig, axes, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=4)
        fig.suptitle("Dense layers: GFLOP/s by size, single core, with the FMA roofs (dashed black) and peers "
                     "(dotted); colour: arithmetic, marker: ISA; `__ref` left out")
        fig.tight_layout()
        self.save(fig, "bench_dense.png", "Dense layers")


    def threads_panel(self, ax, suite, title):
        results = self.results
        counts = [int(t) for t in thread_counts(results, suite)]
        best_one = 0
        for k in results.kernels.get(suite, []):
            pts = [(t, results.value(suite, k, str(t), "flops_per_second")) for t in counts]
            pts = [(t, v / 1e9) for t, v in pts if v]
            if pts:
                ax.plot(*zip(*pts), **style(results, k))
                if not is_peer(k) and pts[0][0] == 1:
                    best_one = max(best_one, pts[0][1])
        if best_one and counts:
            ax.plot(counts, [best_one * t for t in counts], color="0.5", ls=":", lw=1.5,
                    label="linear from the fastest 1-thread kernel")
        roof, isa = self.roofs.best_fma("f32")
        if roof and counts:
            ax.plot(counts, [roof / 1e9 * t for t in counts], color="k", ls="--", lw=1.2, alpha=0.6,
                    label=f"f32 fma {isa} roof × threads")
        ax.set_xscale("log", base=2)
        if counts:
            ax.set_xticks(counts, [str(t) for t in counts])
            ax.minorticks_off()
        ax.set_xlabel("threads")
        ax.set_ylabel("GFLOP/s")
        ax.set_ylim(bottom=0)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)

    def threads_chart(self):
        panels = [(suite, title) for suite, title in THREAD_SUITES if self.results.kernels.get(suite)]
        if not panels:
            return
        fig, axes = self.plt.subplots(1, len(panels), figsize=(7 * len(panels) + 1, 5.5), squeeze=False)
        for ax, (suite, title) in zip(axes.flat, panels):
            self.threads_panel(ax, suite, title)
        self.legend(fig, axes, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=4)
        fig.suptitle("Dense layers at 1024³ on several threads: GFLOP/s against the thread count, with linear "
                     "scaling (dotted) and the best f32 FMA roof × threads (dashed); colour: arithmetic, marker: ISA")
        fig.tight_layout()
        self.save(fig, "bench_threads.png", "Dense layers on several threads")


def write_charts(data, info, directory):
    """Writes the four PNGs into directory; returns [(file name, title)]. ImportError without matplotlib."""
    charts = Charts(data, info, directory)
    charts.memory_chart(charts.results.ops.reduce, "bench_reductions.png", "Reductions")
    charts.memory_chart(charts.results.ops.nn, "bench_nn.png", "Losses, softmax and cross-entropy")
    charts.dense_chart()
    charts.threads_chart()
    return charts.written
