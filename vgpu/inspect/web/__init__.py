"""`vgpu inspect --serve`: the report as a live, read-only web page.

Built from the very values `kubectl inspect vgpu` prints (`vgpu.inspect.build.build_report`,
`vgpu.inspect.queues.queue_report`), never a second model: `view` (pure: a snapshot -> the
values a page shows, the filters, the JSON document), `pages`, `detail` and `queuepage` (pure:
values -> HTML, every name from the cluster escaped), `server` (the standard library's HTTP
server and the loop that re-reads the cluster) and `assets/` (one stylesheet and one small
script, served by the process: nothing is fetched from elsewhere, so it works air-gapped; the
pages are plain tables that work without the script).
"""
