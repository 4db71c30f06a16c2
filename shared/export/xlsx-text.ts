/**
 * Text cells of an XLSX as the format escapes them (docs/api.md "Export", XLSX): a worksheet is
 * XML, whose readers turn a carriage return in text into a line feed, so the format writes a
 * character XML cannot carry as `_xHHHH_` (its UTF-16 code in hex; ECMA-376 Part 1, ST_Xstring),
 * and a literal `_xHHHH_` in the text as `_x005F_xHHHH_`. Spreadsheet programs read and write
 * the same escape; exceljs does neither, so the export escapes and the import unescapes here.
 */

const ESCAPED = /_x[0-9A-Fa-f]{4}_/g;

/** A text cell's value as the sheet holds it: `_` of a literal `_xHHHH_` and every CR escaped. */
export function escapeXlsxText(text: string): string {
  if (!text.includes('_x') && !text.includes('\r')) return text;
  return text.replace(ESCAPED, (match) => `_x005F${match}`).replace(/\r/g, '_x000D_');
}

/** A text cell's value as it was written: every `_xHHHH_` is the character of that code. */
export function unescapeXlsxText(text: string): string {
  if (!text.includes('_x')) return text;
  return text.replace(ESCAPED, (match) => String.fromCharCode(parseInt(match.slice(2, 6), 16)));
}
