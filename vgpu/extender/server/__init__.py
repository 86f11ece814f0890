"""The extender's HTTP server: transport only, no scheduling.

It serves the verbs of `vgpu.extender.routes` over HTTP/1.1 (`http1`, reading requests with
`http1_request`) and, on TLS connections that choose "h2", over HTTP/2 (`http2`, its sending
half `http2_sending`, its per-connection budgets `http2_budgets`); `limits` bounds what one
client may cost over either, `dispatch` decides which thread makes a request's reply, and `tls`
holds the certificates and their reloading. A room of its own so that the verbs never import the
transport: the arrows run from here down to `routes`, never back.
"""
