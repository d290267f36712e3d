"""The peer libraries of one suite (dense_fwd/<lib>_<dtype>_dense_fwd__peer/<size>,
softmax/<lib>_<dtype>_softmax__peer/<level>, ...): each present, skipped (with its message) or not built, and the
fastest of a storage type. A peer is shown by its peer_label, <lib>[_<isa>]_<dtype>: the table names the op."""

import collections

from .results import is_peer, peer_kernel, peer_label

# A halfmap kernel's rate and a peer's, for a ratio: both from `run` (the main run "", or an extra run's name) where
# one run timed both, else (run None) the kernel's from the main run and the peer's pooled cell. spread and
# base_spread: their (lowest, highest, repetitions) in that run, or None.
Pair = collections.namedtuple("Pair", "value spread base base_spread peer run why")

PEERS_HINT = "peer not built: install with tools/setup.sh --peers"
# The peers the benchmarks may hold, per suite, by peer_label (<lib>_<dtype>: <lib>_<dtype>_<op>__peer).
EXPECTED_PEERS = {
    "dense_fwd": ("openblas_f32", "onednn_f32", "xnnpack_f32", "eigen_f32", "openblas_bf16", "onednn_bf16",
                  "xnnpack_f16", "eigen_f16", "onednn_f16"),
    "softmax": ("xnnpack_f32", "onednn_f32", "onednn_bf16", "onednn_f16"),
    "layernorm": ("onednn_f32", "onednn_bf16", "onednn_f16"),
}


class Peers:
    """The peers of one suite: status per expected or present peer, and the best peer of a dtype family."""

    def __init__(self, results, context, suite):
        self.results, self.suite = results, suite
        self.present = [k for k in results.kernels.get(suite, []) if is_peer(k)]
        any_peer = any(is_peer(k) for ks in results.kernels.values() for k in ks)
        built = str(context.get("peers_built", "")).strip().lower()
        # Not built: no __peer benchmark anywhere in the run and nothing in the context saying otherwise.
        self.not_built = not any_peer and built in ("", "0", "false", "no", "none", "off")

    def status(self):
        """[(peer, text)] for every expected or present peer."""
        names = list(EXPECTED_PEERS.get(self.suite, ()))
        names += [peer_label(k) for k in self.present if peer_label(k) not in names]
        rows = []
        for name in names:
            kernel = peer_kernel(name, self.suite)
            if self.not_built:
                rows.append((name, PEERS_HINT))
            elif (self.suite, kernel) in self.results.skipped:
                rows.append((name, "skipped: " + self.results.skipped[(self.suite, kernel)]))
            elif kernel in self.present:
                rows.append((name, "measured"))
            else:
                rows.append((name, "not in this run"))
        return rows

    def status_lines(self):
        return [f"- `{name}`: {text}" for name, text in self.status()]

    def _of(self, family):
        return [k for k in self.present if self.results.storage(k) == family]

    def why_none(self, family):
        """The long form of best()'s reason, for the targets table."""
        if self.not_built:
            return PEERS_HINT
        skipped = [f"{peer_label(k)}: {self.results.skipped[(self.suite, k)]}" for k in self._of(family)
                   if (self.suite, k) in self.results.skipped]
        return ("peer skipped: " + "; ".join(skipped)) if skipped else f"no {family} peer in this run"

    def why_missing(self, peer, arg):
        """Why one named peer has no value at arg, for the targets table."""
        return PEERS_HINT if self.not_built else "peer " + self.results.why_missing(self.suite, peer, arg)

    def best(self, family, arg, counter):
        """(value, peer name, None) of the fastest peer of dtype `family` at arg, or (None, None, why)."""
        values = [(self.results.value(self.suite, k, arg, counter), k) for k in self._of(family)]
        values = [(v, k) for v, k in values if v]
        if values:
            v, k = max(values)
            return v, peer_label(k), None
        if self.not_built:
            return None, None, "peer not built"
        if any((self.suite, k) in self.results.skipped for k in self._of(family)):
            return None, None, "peer skipped"  # the message is in the list of peers under the table
        return None, None, "no peer"

    def best_same_isa(self, kernel, arg, counter):
        """(value, peer, None) of the fastest peer with the ISA and arithmetic of halfmap's `kernel` at arg (the
        peers' isa= and mode= labels; capped peers from the extra runs of tools/main.sh), or (None, None, why)."""
        isa, arith = self.results.isa_and_arithmetic(kernel)
        if not isa or not arith:
            return None, None, "no arithmetic shared with a peer"
        same = [k for k in self.present if self.results.isa_and_arithmetic(k) == (isa, arith)]
        values = [(v, k) for v, k in ((self.results.value(self.suite, k, arg, counter), k) for k in same) if v]
        if values:
            v, k = max(values)
            return v, peer_label(k), None
        if self.not_built:
            return None, None, "peer not built"
        if any((self.suite, k) in self.results.skipped for k in same):
            return None, None, f"{isa} {arith} peer skipped"
        return None, None, f"no {isa} {arith} peer in this run"

    def same_isa_pair(self, kernel, arg, counter):
        """Pair of halfmap's `kernel` and the peer of its ISA and arithmetic that it compares worst with at arg. A
        peer's ratio takes both rates from one run where a run timed both (tools/main.sh's capped runs time the
        kernels of their ISA beside their peers), the lowest such ratio if several did, else the kernel's main
        cell over the peer's pooled one (a JSON from before those runs timed the kernels). No peer: Pair with value
        (the kernel's main cell) and why."""
        results, suite = self.results, self.suite
        value = results.value(suite, kernel, arg, counter)
        isa_arith = results.isa_and_arithmetic(kernel)
        same = [k for k in self.present if results.isa_and_arithmetic(k) == isa_arith]
        candidates = []
        for peer in same if value is not None and all(isa_arith) else []:
            pairs = results.same_run(suite, kernel, peer, arg, counter)
            for run, v, b in pairs:
                candidates.append((v / b, Pair(v, results.run_spread(run, suite, kernel, arg, counter), b,
                                               results.run_spread(run, suite, peer, arg, counter),
                                               peer_label(peer), run, None)))
            b = results.value(suite, peer, arg, counter)
            if not pairs and b:
                candidates.append((value / b, Pair(value, results.spread(suite, kernel, arg, counter), b,
                                                   results.spread(suite, peer, arg, counter), peer_label(peer),
                                                   None, None)))
        if candidates:
            return min(candidates, key=lambda c: c[0])[1]
        why = self.best_same_isa(kernel, arg, counter)[2]
        return Pair(value, results.spread(suite, kernel, arg, counter), None, None, None, None, why)

    def ratio_same_isa(self, kernel, arg, counter):
        """A halfmap kernel's rate / the peer of its ISA and arithmetic it compares worst with (same_isa_pair):
        '1.02 (onednn_avx2_f32)', or why not."""
        pair = self.same_isa_pair(kernel, arg, counter)
        return "-" if pair.value is None else f"{pair.value / pair.base:.2f} ({pair.peer})" if pair.base else pair.why

    def ratio(self, kernel, arg, counter):
        """A halfmap kernel's rate / the best peer of its storage type at arg: '0.87 (onednn_f32)', the reason
        there is none, or '-' when the kernel has no value."""
        value = self.results.value(self.suite, kernel, arg, counter)
        base, name, why = self.best(self.results.storage(kernel), arg, counter)
        return "-" if value is None else f"{value / base:.2f} ({name})" if base else why
