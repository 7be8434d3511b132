/**
 * The one script, served from /static/app.js so the page's CSP can keep `script-src 'self'` (no
 * inline script anywhere). It only copies text: a button with `data-copy` puts that text on the
 * clipboard. Pages work without it; the text stays selectable in its read-only field.
 */
export const SCRIPT = `
document.addEventListener('click', function (e) {
  var b = e.target instanceof Element ? e.target.closest('button[data-copy]') : null;
  if (!b) return;
  var text = b.getAttribute('data-copy') || '';
  var done = function () { b.textContent = 'Copied'; setTimeout(function () { b.textContent = 'Copy'; }, 1500); };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(done, function () { b.textContent = 'Select and copy'; });
  } else {
    var field = b.previousElementSibling;
    if (field instanceof HTMLInputElement) { field.select(); document.execCommand('copy'); done(); }
  }
});
`;
