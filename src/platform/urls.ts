/** Hosts that stay on this machine: plain http to them crosses no network. */
const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]'])

/** `url.hostname` is a loopback host (IPv6 as URL writes it, in brackets). */
export const isLoopbackHost = (hostname: string): boolean => LOOPBACK_HOSTS.has(hostname)
