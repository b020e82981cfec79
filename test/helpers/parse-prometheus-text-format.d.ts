declare module 'parse-prometheus-text-format' {
  interface ParsedSample {
    value?: string
    labels?: Record<string, string>
    buckets?: Record<string, string>
    count?: string
    sum?: string
  }
  interface ParsedFamily {
    name: string
    help: string
    /** COUNTER, GAUGE, HISTOGRAM, SUMMARY or UNTYPED (no TYPE line). */
    type: string
    metrics: ParsedSample[]
  }
  export default function parsePrometheusTextFormat(text: string): ParsedFamily[]
}
