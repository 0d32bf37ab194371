# awk functions shared by the benchmark scripts' tables (prepended to their programs: "$(cat stats.awk)"'...').
# val(line, key): the value of key=value in a line of space-separated pairs ("" if absent);
# median(list): the median of a comma-separated list of numbers.
function val(line, key,   i, n, kv) {
    n = split(line, kv, " ")
    for (i = 1; i <= n; i++) if (index(kv[i], key "=") == 1) return substr(kv[i], length(key) + 2)
    return ""
}
function median(list,   n, a, i, j, t) {
    n = split(list, a, ",")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
