"""Exact, fast DBSCAN [Ester1996] labels for many ``eps`` values on the same 2-D points.

Private helper of :func:`metrics.unfairness.intersectional_unfairness`.

Semantics replicated (scikit-learn ``DBSCAN``, euclidean, ``algorithm="auto"`` on
more than 11 points, i.e. a KD-tree):

* ``j`` is a neighbour of ``i`` when ``sum_k (x_ik - x_jk) ** 2 <= eps * eps``, the
  squared distance being summed feature by feature in float64 exactly as
  ``sklearn.metrics._dist_metrics.euclidean_rdist`` does; the neighbourhood contains
  the point itself.
* ``i`` is a core point when it has at least ``min_samples`` neighbours, i.e. when the
  ``min_samples``-th smallest squared distance from ``i`` (itself included) is
  ``<= eps * eps``.
* Clusters are the connected components of the core points (edges between cores that
  are neighbours). ``sklearn.cluster._dbscan_inner.dbscan_inner`` visits points in
  index order and runs a depth-first search from every unlabelled core point, to
  completion, before looking at the next index. Hence cluster ``k`` is the component
  whose smallest core index is the ``k``-th smallest, and a border point (a non-core
  neighbour of one or more cores) is labelled by the *first* search that reaches it:
  it gets the smallest cluster label among its core neighbours. This does not depend
  on the order inside a search, only on the order between searches, which we mirror.

Algorithm (per ``eps``, independent of the other ``eps`` values):

1. Once: ``min_samples`` nearest neighbours of every point (KD-tree) with their exact
   squared distances. The last column is each point's core threshold. A non-core point
   has fewer than ``min_samples`` neighbours, so all of them are in that list: border
   assignment needs nothing else.
2. Core connectivity on a grid of square cells of side ``eps / 3``. Two cores in the
   same or 8-adjacent cells are at most ``eps * sqrt(8) / 3 = 0.943 eps`` apart: always
   neighbours (a 6% margin dwarfs rounding). Cells further apart than the 8-neighbourhood
   but possibly within ``eps`` (26 offsets each way) are only examined when they are
   in different components after step 2; their core bounding boxes decide most pairs
   (with a 1e-9 relative margin), and the few undecided pairs are settled by exact
   point-to-point squared distances, computed as above.

On at most :data:`_DENSE_MAX` points, step 2 is replaced, once for all ``eps`` values, by a minimum
spanning tree of the points under the mutual reachability weight ``max(d2(i, j), threshold(i),
threshold(j))`` (Prim's algorithm on the dense matrix of the exact squared distances): two cores are
neighbours at ``eps`` exactly when their weight is ``<= eps * eps``, every edge of a non-core point weighs
more than that, and the components of any minimum spanning tree's edges of weight ``<= t`` are those of the
whole graph's (ties included), so each ``eps`` only joins the tree's next edges (the ensemble 5.8x faster on 300
points, 2.6x on 1,500: bench/bench_intersectional.py).

The only possible difference from scikit-learn is when a squared distance lies within
rounding (about 1e-16 relative) of ``eps * eps`` *and* scikit-learn's KD-tree included
the point through a node bound instead of the point's own distance; random or gridded
data does not hit this in practice (the tests compare against scikit-learn).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

# Cell offsets, half of each symmetric set (the other half is the reverse pair).
_ADJACENT = ((1, -1), (1, 0), (1, 1), (0, 1))
# Offsets (dx, dy) outside the 8-neighbourhood whose cells can hold points within eps:
# the gap between cells is side * sqrt(max(|dx|-1,0)^2 + max(|dy|-1,0)^2) and
# side = eps / 3, so keep (|dx|-1)^2 + (|dy|-1)^2 <= 9. Excluded offsets are at least
# side * sqrt(10) = 1.054 eps apart.
_FAR = tuple(
    (dx, dy)
    for dx in range(5)
    for dy in range(-4, 5)
    if (dx > 0 or dy > 0) and max(abs(dx), abs(dy)) >= 2 and (max(abs(dx) - 1, 0) ** 2 + max(abs(dy) - 1, 0) ** 2) <= 9
)
# Largest dense cell-lookup table (entries); beyond it we use a sorted search.
_MAX_TABLE = 20_000_000
# Largest number of point pairs compared at once in the exact check (memory bound).
_PAIR_CHUNK = 4_000_000
_MARGIN = 1e-9
# Largest number of points for the spanning-tree path (two dense n x n float64 matrices: 36 MB at 1,500).
_DENSE_MAX = 1_500


def squared_distances(points: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Squared euclidean distances, summed per feature as scikit-learn's KD-tree does."""
    total = np.zeros(np.broadcast(i, j).shape, dtype=np.float64)
    for k in range(points.shape[1]):
        diff = points[i, k] - points[j, k]
        total += diff * diff
    return total


class NeighbourIndex:
    """Nearest neighbours of every point, computed once for all ``eps`` values.

    Parameters
    ----------
    points : ndarray of shape (n, 2)
        Float64 coordinates (already standardised).
    min_samples : int
        DBSCAN's ``min_samples`` (the point itself included).
    """

    def __init__(self, points: np.ndarray, min_samples: int) -> None:
        from sklearn.neighbors import KDTree

        self.points = np.ascontiguousarray(points, dtype=np.float64)
        n = self.points.shape[0]
        self.min_samples = int(min_samples)
        k = min(self.min_samples, n)
        _, knn = KDTree(self.points).query(self.points, k=k)
        knn_d2 = squared_distances(self.points, np.arange(n)[:, None], knn)
        order = np.argsort(knn_d2, axis=1, kind="stable")
        self.knn = np.take_along_axis(knn, order, axis=1)
        self.knn_d2 = np.take_along_axis(knn_d2, order, axis=1)
        if self.min_samples > n:
            # Nobody can be a core point.
            self.core_threshold = np.full(n, np.inf)
        else:
            self.core_threshold = self.knn_d2[:, -1]
        self._tree: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._edges: list[tuple[int, int, float]] = []
        self._parent: list[int] = list(range(n))
        self._joined = 0  # tree edges (in weight order) joined in ``_parent``
        self._reach_done = -np.inf
        self.dense = n <= _DENSE_MAX and np.isfinite(self.core_threshold).all()

    def _core_components(self, core_index: np.ndarray, reach: float, eps: float) -> np.ndarray:
        """Connected components of the cores ``core_index`` (neighbours within ``eps``), numbered 0, 1, ..."""
        if not self.dense:
            return _core_components(self.points[core_index], reach, eps)
        if self._tree is None:
            a, b, weight = _reachability_tree(self.points, self.core_threshold)
            order = np.argsort(weight, kind="stable")
            self._tree = (a[order], b[order], weight[order])
            self._edges = list(zip(a[order].tolist(), b[order].tolist(), weight[order].tolist(), strict=True))
        if reach < self._reach_done:  # a smaller eps than the last: join again from no edge
            self._parent = list(range(self.points.shape[0]))
            self._joined = 0
        parent, edges, k = self._parent, self._edges, self._joined
        # Union-find over the tree's edges in weight order, up to this eps (the eps grid rises: each edge once).
        while k < len(edges) and edges[k][2] <= reach:
            x, y = edges[k][0], edges[k][1]
            while parent[x] != x:
                parent[x] = x = parent[parent[x]]
            while parent[y] != y:
                parent[y] = y = parent[parent[y]]
            if x != y:
                parent[max(x, y)] = min(x, y)
            k += 1
        self._joined, self._reach_done = k, reach
        root = np.asarray(parent, dtype=np.intp)
        while True:  # every point's root
            up = root[root]
            if np.array_equal(up, root):
                break
            root = up
        return np.unique(root[core_index], return_inverse=True)[1].astype(np.intp, copy=False)

    def labels(self, eps: float) -> np.ndarray:
        """DBSCAN labels (``-1`` = noise) for one ``eps``, numbered as scikit-learn does."""
        points = self.points
        n = points.shape[0]
        reach = float(eps) * float(eps)
        is_core = self.core_threshold <= reach
        labels = np.full(n, -1, dtype=np.intp)
        core_index = np.flatnonzero(is_core)
        if core_index.size == 0:
            return labels
        component = self._core_components(core_index, reach, float(eps))
        # Cluster k = component with the k-th smallest core index (dbscan_inner order).
        _, first = np.unique(component, return_index=True)
        rank = np.empty(first.size, dtype=np.intp)
        rank[np.argsort(first)] = np.arange(first.size)
        labels[core_index] = rank[component]
        # Border points: smallest cluster label among core neighbours within eps.
        border_rows = np.flatnonzero(~is_core)
        if border_rows.size:
            nb = self.knn[border_rows]
            reachable = (self.knn_d2[border_rows] <= reach) & is_core[nb]
            candidate = np.where(reachable, labels[nb], np.iinfo(np.intp).max)
            best = candidate.min(axis=1)
            has = reachable.any(axis=1)
            labels[border_rows[has]] = best[has]
        return labels


def dbscan_labels_many(
    points: np.ndarray, eps_values: Iterable[float], min_samples: int
) -> Iterator[tuple[float, np.ndarray]]:
    """Yield ``(eps, labels)`` for every eps, equal to ``DBSCAN(eps, min_samples)``.

    Parameters
    ----------
    points : ndarray of shape (n, 2)
        Coordinates.
    eps_values : iterable of float
        Neighbourhood radii.
    min_samples : int
        Minimum neighbourhood size of a core point, itself included.

    Yields
    ------
    tuple of (float, ndarray of shape (n,))
        The radius and the labels, ``-1`` for noise.
    """
    index = NeighbourIndex(points, min_samples)
    for eps in eps_values:
        yield float(eps), index.labels(float(eps))


def _reachability_tree(points: np.ndarray, threshold: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A minimum spanning tree under the mutual reachability weight (module docstring): its ``n - 1`` edges
    as ``(a, b, weight)``. Prim's algorithm on the dense matrix; the squared distances are summed feature by
    feature exactly as :func:`squared_distances` (the same floats)."""
    n = points.shape[0]
    weight = np.zeros((n, n), dtype=np.float64)
    for k in range(points.shape[1]):
        diff = points[:, k, None] - points[None, :, k]
        weight += diff * diff
    np.maximum(weight, threshold[:, None], out=weight)
    np.maximum(weight, threshold[None, :], out=weight)
    outside = np.ones(n, dtype=bool)
    outside[0] = False
    best = weight[0].copy()
    best[0] = np.inf
    parent = np.zeros(n, dtype=np.intp)
    a = np.empty(n - 1, dtype=np.intp)
    b = np.empty(n - 1, dtype=np.intp)
    w = np.empty(n - 1, dtype=np.float64)
    for k in range(n - 1):
        j = int(np.argmin(best))
        a[k], b[k], w[k] = parent[j], j, best[j]
        outside[j] = False
        best[j] = np.inf
        closer = outside & (weight[j] < best)
        best[closer] = weight[j][closer]
        parent[closer] = j
    return a, b, w


def _core_components(core_points: np.ndarray, reach: float, eps: float) -> np.ndarray:
    """Connected components of core points, edges = squared distance <= ``reach``."""
    n = core_points.shape[0]
    if n == 1:
        return np.zeros(1, dtype=np.intp)
    side = eps / 3.0
    origin = core_points.min(axis=0)
    cell = np.floor((core_points - origin) / side).astype(np.int64)
    cell = np.maximum(cell, 0)  # guard against -0.0 rounding
    pad = 5
    stride = int(cell[:, 1].max()) + 2 * pad + 1
    width = int(cell[:, 0].max()) + 2 * pad + 1
    key = (cell[:, 0] + pad) * stride + (cell[:, 1] + pad)
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    sorted_points = core_points[order]
    starts = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]])
    n_cells = starts.size
    counts = np.diff(np.r_[starts, n])
    cell_key = sorted_key[starts]
    cell_of_sorted = np.repeat(np.arange(n_cells), counts)

    if width * stride <= _MAX_TABLE:
        table = np.full(width * stride, -1, dtype=np.intp)
        table[cell_key] = np.arange(n_cells)

        def lookup(keys: np.ndarray) -> np.ndarray:
            return np.asarray(table[keys])

    else:

        def lookup(keys: np.ndarray) -> np.ndarray:
            pos = np.searchsorted(cell_key, keys)
            pos_clipped = np.minimum(pos, n_cells - 1)
            return np.where(cell_key[pos_clipped] == keys, pos_clipped, -1)

    cell_ids = np.arange(n_cells)
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    for dx, dy in _ADJACENT:
        other = lookup(cell_key + dx * stride + dy)
        hit = other >= 0
        rows.append(cell_ids[hit])
        cols.append(other[hit])
    n_comp, comp = _components(n_cells, rows, cols)
    if n_comp > 1:
        lo = np.column_stack([np.minimum.reduceat(sorted_points[:, k], starts) for k in range(2)])
        hi = np.column_stack([np.maximum.reduceat(sorted_points[:, k], starts) for k in range(2)])
        pair_a: list[np.ndarray] = []
        pair_b: list[np.ndarray] = []
        for dx, dy in _FAR:
            other = lookup(cell_key + dx * stride + dy)
            hit = other >= 0
            a = cell_ids[hit]
            b = other[hit]
            apart = comp[a] != comp[b]
            pair_a.append(a[apart])
            pair_b.append(b[apart])
        a = np.concatenate(pair_a)
        b = np.concatenate(pair_b)
        if a.size:
            gap = np.maximum(0.0, np.maximum(lo[b] - hi[a], lo[a] - hi[b]))
            span = np.maximum(np.abs(hi[b] - lo[a]), np.abs(hi[a] - lo[b]))
            min_d2 = (gap * gap).sum(axis=1)
            max_d2 = (span * span).sum(axis=1)
            sure = max_d2 <= reach * (1.0 - _MARGIN)
            unsure = ~sure & (min_d2 <= reach * (1.0 + _MARGIN))
            rows.append(a[sure])
            cols.append(b[sure])
            ua, ub = a[unsure], b[unsure]
            if ua.size:
                linked = _link_uncertain(sorted_points, starts, counts, cell_of_sorted, lo, hi, ua, ub, reach)
                rows.append(ua[linked])
                cols.append(ub[linked])
            n_comp, comp = _components(n_cells, rows, cols)
    component_sorted = comp[cell_of_sorted]
    component = np.empty(n, dtype=np.intp)
    component[order] = component_sorted
    return component


def _components(n_nodes: int, rows: list[np.ndarray], cols: list[np.ndarray]) -> tuple[int, np.ndarray]:
    r = np.concatenate(rows) if rows else np.empty(0, dtype=np.intp)
    c = np.concatenate(cols) if cols else np.empty(0, dtype=np.intp)
    graph = coo_matrix((np.ones(r.size, dtype=np.int8), (r, c)), shape=(n_nodes, n_nodes)).tocsr()
    n_comp, comp = connected_components(graph, directed=False)
    return int(n_comp), comp.astype(np.intp, copy=False)


def _expand(starts: np.ndarray, counts: np.ndarray, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the points of ``cells`` (in sorted order) and the index of their cell."""
    size = counts[cells]
    owner = np.repeat(np.arange(cells.size), size)
    local = np.arange(size.sum()) - np.repeat(np.cumsum(size) - size, size)
    return starts[cells][owner] + local, owner


def _link_uncertain(
    sorted_points: np.ndarray,
    starts: np.ndarray,
    counts: np.ndarray,
    cell_of_sorted: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    cells_a: np.ndarray,
    cells_b: np.ndarray,
    reach: float,
) -> np.ndarray:
    """For each cell pair, whether some point pair has squared distance <= reach.

    First a linear-time search that finds most linked pairs: each point of one cell
    against the two points of the other cell nearest to it along each axis. The pairs
    it does not link are settled exactly by comparing all points of each cell that lie
    within reach of the other cell's bounding box.
    """
    linked = np.zeros(cells_a.size, dtype=bool)
    for axis in range(sorted_points.shape[1]):
        coord = sorted_points[:, axis]
        low = coord.min()
        width = coord.max() - low + 1.0
        by_axis = np.lexsort((coord, cell_of_sorted))
        sort_value = cell_of_sorted[by_axis] * width + (coord[by_axis] - low)
        for src, dst in ((cells_a, cells_b), (cells_b, cells_a)):
            todo = np.flatnonzero(~linked)
            if todo.size == 0:
                return linked
            point, owner = _expand(starts, counts, src[todo])
            target = dst[todo][owner]
            pos = np.searchsorted(sort_value, target * width + (coord[point] - low))
            first = starts[target]
            last = first + counts[target] - 1
            for shift in (0, -1):
                cand = by_axis[np.clip(pos + shift, first, last)]
                close = squared_distances(sorted_points, point, cand) <= reach
                linked[todo[np.unique(owner[close])]] = True

    todo = np.flatnonzero(~linked)
    if todo.size == 0:
        return linked
    near = []
    for src, dst in ((cells_a[todo], cells_b[todo]), (cells_b[todo], cells_a[todo])):
        point, owner = _expand(starts, counts, src)
        gap = np.maximum(
            0.0,
            np.maximum(
                lo[dst][owner] - sorted_points[point],
                sorted_points[point] - hi[dst][owner],
            ),
        )
        keep = (gap * gap).sum(axis=1) <= reach * (1.0 + _MARGIN)
        near.append((point[keep], np.bincount(owner[keep], minlength=todo.size)))
    (points_a, count_a), (points_b, count_b) = near
    start_a = np.cumsum(count_a) - count_a
    start_b = np.cumsum(count_b) - count_b
    sizes = count_a * count_b
    # Group consecutive pairs into chunks of about _PAIR_CHUNK point pairs.
    chunk_id = (np.cumsum(sizes) - sizes) // _PAIR_CHUNK
    for chunk in np.split(np.arange(todo.size), np.flatnonzero(np.diff(chunk_id)) + 1):
        size = sizes[chunk]
        pair = np.repeat(np.arange(chunk.size), size)
        local = np.arange(size.sum()) - np.repeat(np.cumsum(size) - size, size)
        nb = count_b[chunk][pair]
        i = points_a[start_a[chunk][pair] + local // nb]
        j = points_b[start_b[chunk][pair] + local % nb]
        close = squared_distances(sorted_points, i, j) <= reach
        linked[todo[chunk]] = np.bincount(pair[close], minlength=chunk.size) > 0
    return linked
