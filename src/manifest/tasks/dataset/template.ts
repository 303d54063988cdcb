/**
 * Field templates of dataset-backed tasks: `{name}` is replaced by the field `name` of the row
 * (`{{` and `}}` write a literal brace). For input and target, a template without any brace names
 * one column whole, so `input: text` and `input: "{text}"` mean the same.
 */
export interface Template {
  /** Literal text and field names, alternating: parts[0] text, parts[1] field, parts[2] text, ... */
  readonly parts: readonly string[];
  readonly fields: readonly string[];
  readonly source: string;
}

export class TemplateError extends Error {}

/** `column`: a brace-free template names one column whole (input, target); else it is literal text. */
export function parseTemplate(source: string, options: { column?: boolean } = {}): Template {
  const text = options.column && !/[{}]/.test(source) ? `{${source}}` : source;
  const parts: string[] = [];
  let literal = '';
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i] as string;
    if ((c === '{' || c === '}') && text[i + 1] === c) {
      literal += c;
      i += 1;
    } else if (c === '{') {
      const close = text.indexOf('}', i);
      const name = close < 0 ? '' : text.slice(i + 1, close);
      if (!/^[A-Za-z_][\w.-]*$/.test(name)) {
        throw new TemplateError(
          `${JSON.stringify(source)}: ${close < 0 ? 'a { is never closed' : `{${name}} is not a field name`}; write {field}, or {{ for a literal brace`,
        );
      }
      parts.push(literal, name);
      literal = '';
      i = close;
    } else if (c === '}') {
      throw new TemplateError(`${JSON.stringify(source)}: a } without its {; write }} for a literal brace`);
    } else literal += c;
  }
  parts.push(literal);
  return { parts, fields: parts.filter((_, k) => k % 2 === 1), source };
}

/** Render with `values`; every field must be there (checked up front by `missingFields`). */
export function renderTemplate(t: Template, values: Readonly<Record<string, string>>): string {
  let out = '';
  t.parts.forEach((part, k) => {
    out += k % 2 === 0 ? part : (values[part] as string);
  });
  return out;
}

export function missingFields(t: Template, available: ReadonlySet<string>): string[] {
  return t.fields.filter((f) => !available.has(f));
}

/** How many times field `name` appears. */
export function fieldCount(t: Template, name: string): number {
  return t.fields.filter((f) => f === name).length;
}

/** The rendering up to the first `{name}` (the canary's prefill, up to `{code}`). */
export function renderBefore(t: Template, name: string, values: Readonly<Record<string, string>>): string {
  const at = t.parts.findIndex((p, k) => k % 2 === 1 && p === name);
  return renderTemplate({ parts: t.parts.slice(0, at), fields: [], source: t.source }, values);
}
