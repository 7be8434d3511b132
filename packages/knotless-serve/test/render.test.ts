// A README's links and images that are not URLs, or hold a malformed %-escape, fall back as intended
// (render.ts checks with URL.canParse and catches only decodeURIComponent's URIError).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderMarkdown, type ImageSources } from '../src/web/render.ts';

const images: ImageSources = {
  remote: (u) => `/-/img/${encodeURIComponent(u)}`,
  local: (p) => `/raw/${p}`,
  link: (p) => `/tree/${p}`,
  dir: 'docs',
};
const render = (text: string): string => String(renderMarkdown(text, images)).trim();

describe('README links and images', () => {
  it('shows an image whose source is not a URL as its alt text', () => {
    assert.equal(render('![the alt](http://[::1/x.png)'), '<p>the alt</p>');
  });

  it('keeps a malformed %-escape of a local image or link as written', () => {
    assert.match(render('![a](a%zz.png)'), /<img src="\/raw\/docs\/a%zz.png"/);
    assert.match(render('[l](b%zz)'), /<a href="\/tree\/docs\/b%zz"/);
  });

  it('decodes a well-formed escape and resolves relative paths from the README directory', () => {
    assert.match(render('![a](../my%20pic.png)'), /<img src="\/raw\/my pic.png"/);
    assert.match(render('[l](/x%2Fy.md#top)'), /<a href="\/tree\/x\/y.md#top"/);
  });

  it('sends a remote image through the proxy', () => {
    assert.match(
      render('![a](https://example.com/p.png)'),
      /src="\/-\/img\/https%3A%2F%2Fexample.com%2Fp.png"/,
    );
  });
});
