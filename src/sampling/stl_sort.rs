//! The two unstable sorts llama.cpp's samplers use, step for step as GCC's
//! libstdc++ runs them (`std::partial_sort`: a heap selection, then a heap
//! sort; `std::sort`: introsort with a median-of-three pivot, heap sort past
//! the depth limit, and a final insertion sort over runs of 16). Equal keys
//! come out in the order these steps leave them, which is what a seeded
//! draw walks over: with another order, a draw that lands on one of two
//! tied tokens would pick the other.
//!
//! `less` must be a strict weak order for the order to be libstdc++'s; the
//! loops that libstdc++ leaves unguarded are bounded here, so an
//! inconsistent `less` (NaN logits) gives some order, never a panic.

/// Sifts `value` up from `hole` towards `top` (`std::__push_heap`).
fn push_heap<T: Copy>(
    v: &mut [T],
    mut hole: usize,
    top: usize,
    value: T,
    less: &impl Fn(&T, &T) -> bool,
) {
    while hole > top {
        let parent = (hole - 1) / 2;
        if !less(&v[parent], &value) {
            break;
        }
        v[hole] = v[parent];
        hole = parent;
    }
    v[hole] = value;
}

/// Moves the hole at `hole` down to a leaf along the larger children, then
/// sifts `value` up from there (`std::__adjust_heap`), within `v[..len]`.
fn adjust_heap<T: Copy>(
    v: &mut [T],
    mut hole: usize,
    len: usize,
    value: T,
    less: &impl Fn(&T, &T) -> bool,
) {
    let top = hole;
    let mut child = hole;
    while len >= 2 && child < (len - 1) / 2 {
        child = 2 * (child + 1);
        if less(&v[child], &v[child - 1]) {
            child -= 1;
        }
        v[hole] = v[child];
        hole = child;
    }
    if len >= 2 && len.is_multiple_of(2) && child == (len - 2) / 2 {
        child = 2 * (child + 1);
        v[hole] = v[child - 1];
        hole = child - 1;
    }
    push_heap(v, hole, top, value, less);
}

fn make_heap<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    let len = v.len();
    if len < 2 {
        return;
    }
    let mut parent = (len - 2) / 2;
    loop {
        let value = v[parent];
        adjust_heap(v, parent, len, value, less);
        if parent == 0 {
            return;
        }
        parent -= 1;
    }
}

/// Puts the heap top of `v[..end]` at `result` and the old `v[result]` into
/// the heap (`std::__pop_heap`).
fn pop_heap<T: Copy>(v: &mut [T], end: usize, result: usize, less: &impl Fn(&T, &T) -> bool) {
    let value = v[result];
    v[result] = v[0];
    adjust_heap(v, 0, end, value, less);
}

fn sort_heap<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    let mut end = v.len();
    while end > 1 {
        end -= 1;
        pop_heap(v, end, end, less);
    }
}

/// `std::partial_sort(v.begin(), v.begin() + middle, v.end(), less)`: the
/// `middle` smallest under `less`, sorted, first; the rest in heap order.
pub(super) fn partial_sort<T: Copy>(v: &mut [T], middle: usize, less: impl Fn(&T, &T) -> bool) {
    let middle = middle.min(v.len());
    make_heap(&mut v[..middle], &less);
    for i in middle..v.len() {
        if middle > 0 && less(&v[i], &v[0]) {
            pop_heap(v, middle, i, &less);
        }
    }
    sort_heap(&mut v[..middle], &less);
}

/// Runs shorter than this are left to the final insertion sort.
const THRESHOLD: usize = 16;

/// `std::sort(v.begin(), v.end(), less)`.
pub(super) fn sort<T: Copy>(v: &mut [T], less: impl Fn(&T, &T) -> bool) {
    if v.len() < 2 {
        return;
    }
    let depth_limit = 2 * v.len().ilog2() as usize;
    introsort_loop(v, depth_limit, &less);
    final_insertion_sort(v, &less);
}

fn introsort_loop<T: Copy>(
    mut v: &mut [T],
    mut depth_limit: usize,
    less: &impl Fn(&T, &T) -> bool,
) {
    while v.len() > THRESHOLD {
        if depth_limit == 0 {
            let n = v.len();
            partial_sort(v, n, less);
            return;
        }
        depth_limit -= 1;
        let cut = partition_around_pivot(v, less);
        let (left, right) = v.split_at_mut(cut);
        introsort_loop(right, depth_limit, less);
        v = left;
    }
}

/// The median of `v[a]`, `v[b]`, `v[c]` swapped into `v[0]`
/// (`std::__move_median_to_first`).
fn median_to_first<T: Copy>(
    v: &mut [T],
    a: usize,
    b: usize,
    c: usize,
    less: &impl Fn(&T, &T) -> bool,
) {
    let m = if less(&v[a], &v[b]) {
        if less(&v[b], &v[c]) {
            b
        } else if less(&v[a], &v[c]) {
            c
        } else {
            a
        }
    } else if less(&v[a], &v[c]) {
        a
    } else if less(&v[b], &v[c]) {
        c
    } else {
        b
    };
    v.swap(0, m);
}

/// Hoare partition of `v[1..]` around the pivot in `v[0]`; returns where
/// the right part starts (`std::__unguarded_partition_pivot`).
fn partition_around_pivot<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) -> usize {
    let n = v.len();
    median_to_first(v, 1, n / 2, n - 1, less);
    let (mut first, mut last) = (1, n);
    loop {
        while first < n && less(&v[first], &v[0]) {
            first += 1;
        }
        last -= 1;
        while last > 0 && less(&v[0], &v[last]) {
            last -= 1;
        }
        if first >= last {
            return first.min(n);
        }
        v.swap(first, last);
        first += 1;
    }
}

/// Inserts `v[i]` into the sorted run before it, without looking past the
/// start when a smaller element is known to be there
/// (`std::__unguarded_linear_insert`).
fn linear_insert<T: Copy>(v: &mut [T], mut i: usize, less: &impl Fn(&T, &T) -> bool) {
    let value = v[i];
    while i > 0 && less(&value, &v[i - 1]) {
        v[i] = v[i - 1];
        i -= 1;
    }
    v[i] = value;
}

fn insertion_sort<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    for i in 1..v.len() {
        if less(&v[i], &v[0]) {
            let value = v[i];
            v.copy_within(0..i, 1);
            v[0] = value;
        } else {
            linear_insert(v, i, less);
        }
    }
}

fn final_insertion_sort<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    if v.len() > THRESHOLD {
        insertion_sort(&mut v[..THRESHOLD], less);
        for i in THRESHOLD..v.len() {
            linear_insert(v, i, less);
        }
    } else {
        insertion_sort(v, less);
    }
}

#[cfg(test)]
mod tests {
    use super::{partial_sort, sort};

    /// Rows with many ties (and NaNs, which must not panic): `sort` orders
    /// them, `partial_sort` orders a prefix of the smallest, and both keep
    /// every element.
    #[test]
    fn sorts_order_and_keep_every_element() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for len in [0usize, 1, 2, 3, 15, 16, 17, 40, 129, 1000] {
            let row: Vec<(u32, u32)> = (0..len as u32).map(|i| ((next() % 23) as u32, i)).collect();
            let mut sorted = row.clone();
            sort(&mut sorted, |a, b| a.0 < b.0);
            assert!(sorted.windows(2).all(|w| w[0].0 <= w[1].0), "len {len}");
            let mut a = sorted.clone();
            a.sort_by_key(|x| x.1);
            assert_eq!(a, row);
            for middle in [0, 1, len / 3, len] {
                let mut part = row.clone();
                partial_sort(&mut part, middle, |a, b| a.0 < b.0);
                let cut = middle.min(len);
                assert!(part[..cut].windows(2).all(|w| w[0].0 <= w[1].0));
                let max_front = part[..cut].iter().map(|x| x.0).max();
                assert!(part[cut..]
                    .iter()
                    .all(|x| max_front.is_none_or(|m| x.0 >= m)));
                part.sort_by_key(|x| x.1);
                assert_eq!(part, row);
            }
            let mut nans: Vec<f32> = (0..len)
                .map(|_| {
                    if next() % 3 == 0 {
                        f32::NAN
                    } else {
                        (next() % 5) as f32
                    }
                })
                .collect();
            sort(&mut nans, |a, b| a > b);
            partial_sort(&mut nans, len / 2, |a, b| a > b);
        }
    }
}
